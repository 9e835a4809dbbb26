"""Planning of the client quotas that enforce a flow's `replication.throttle` (backfills that cannot hurt the source).

A throttled flow gets two resources, the Kafka way (KIP-13 client quotas on the job's own client ids, see
`policy.client_ids`):

- `quota/<source>/<source client id>` with `consumer_byte_rate`: the broker delays the job's fetches so the flow
  reads at most the throttle from the source, whatever its backlog;
- `quota/<target>/<target client id>` with `producer_byte_rate`: the same for its writes.

Kafka enforces a client quota on each broker separately (a client id may read the rate from every broker that leads
partitions it fetches). So each quota is the throttle divided by the brokers of its cluster as the live state read
them (rounded up; the whole throttle when the count was not read): the flow's reads from all brokers together stay
within the throttle. A flow whose partitions are led by fewer brokers than the cluster has reads less than the
throttle (each of those brokers holds it to its share); the division does not follow leadership moves, so the plan
does not change with them. The job's own fetches are sized so that the quota paces them (`spec.fetch_sizing`).

Each form is `{"cluster", "client_id", "flow", "<rate name>": bytes per second on each broker}`. A quota is
created (the throttle was set), updated (it changed, or the cluster's broker count did) or deleted (the setting, or
the flow, was removed: only quotas kmirror recorded are ever deleted). The quotas of a disabled flow are left as
they are (its job is stopped; enabled again, it keeps its throttle). Brokers enforce a quota on any client with that
id, whether kmirror's job runs or not, and at once: a changed throttle takes effect without restarting the job (its
digest holds only the client ids, not the rate).

What the clusters hold comes in as `live` (cluster -> client id -> {quota name: value}), read through Kafka's Java
Admin client by the live-state reader for exactly the client ids named here or recorded. A cluster missing from it
was not read (Java or the Kafka client jars are missing, or the cluster refused: the live-state warnings say why);
each row on it is planned against what kmirror recorded, and the plan says so in a warning.

Pure: values in, values out. Must not: delete or change a quota kmirror did not record, or read a change's reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.errors import Diagnostic
from reconciler.live.model import LiveState
from reconciler.live.selection import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, throttled_clients
from reconciler.plan.definition import Action, QuotaChange
from reconciler.plan.forms import QuotaForm
from reconciler.plan.topics import TopicPlan
from reconciler.resources.addresses import Kind, quota_address
from reconciler.resources.recorded import RecordedState
from reconciler.spec.byte_rates import format_byte_rate
from reconciler.spec.models import DesiredState, FlowSpec

#: The quota names kmirror sets (and the only ones it ever changes on a client id).
RATE_NAMES = (CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE)

#: What the planner knows of the clusters' client quotas: cluster -> client id -> {quota name: value}.
LiveQuotas = Mapping[str, Mapping[str, Mapping[str, float]]]


def unread_warning(clusters: Iterable[str]) -> Diagnostic:
    """The plan's warning when quota rows were planned against kmirror's record, not the brokers' quotas."""
    names = ", ".join(f"'{c}'" for c in sorted(set(clusters)))
    return Diagnostic.warning(
        None,
        f"client quotas were not read from cluster {names}, so its quota/ rows are planned against what kmirror "
        "recorded, not against the broker",
    )


def per_broker(rate: int, brokers: int | None) -> int:
    """A flow's `rate` as the quota each of a cluster's `brokers` enforces (rounded up; None or 0: not divided)."""
    return -(-rate // brokers) if brokers and brokers > 1 else rate


def flow_quotas(
    desired: DesiredState, flow: FlowSpec, brokers: Mapping[str, int] | None = None
) -> dict[str, QuotaForm]:
    """The quota forms a throttled flow needs, by address (empty when the flow has no throttle): each the throttle
    divided by its cluster's `brokers` where the count is known (`per_broker`)."""
    rate = flow.replication.throttle
    if rate is None:
        return {}
    brokers = brokers or {}
    return {
        quota_address(c.cluster, c.client_id): QuotaForm.model_validate(
            {
                "cluster": c.cluster,
                "client_id": c.client_id,
                "flow": flow.name,
                c.quota: per_broker(rate, brokers.get(c.cluster)),
            }
        )
        for c in throttled_clients(desired, flow)
    }


def live_quotas(live: LiveState) -> dict[str, Mapping[str, Mapping[str, float]]]:
    """The client quotas the live state holds, per cluster that was read."""
    return {name: state.quotas for name, state in live.clusters.items() if state.quotas is not None}


def live_brokers(live: LiveState) -> dict[str, int]:
    """The brokers of each cluster whose metadata was read."""
    return {name: state.brokers for name, state in live.clusters.items() if state.brokers}


def plan_quotas(
    desired: DesiredState,
    recorded: RecordedState,
    live: LiveQuotas | None = None,
    brokers: Mapping[str, int] | None = None,
) -> TopicPlan:
    """The quota rows: `live` holds the quotas of each cluster that was read (None: none was), `brokers` the broker
    count of each cluster whose metadata was read (a quota is the throttle's share of one broker)."""
    live = live or {}
    brokers = brokers or {}
    shares: dict[str, str] = {}
    unread: set[str] = set()
    out = TopicPlan()
    want: dict[str, QuotaForm] = {}
    for flow in desired.enabled_flows:
        for address, form in flow_quotas(desired, flow, brokers).items():
            count = brokers.get(form.cluster, 1)
            if count > 1 and flow.replication.throttle is not None:
                shares[address] = (
                    f"{format_byte_rate(flow.replication.throttle)} per second: {_rate(form)} on each of the "
                    f"cluster's {count} brokers (Kafka enforces a client quota on each broker)"
                )
            if address in want:  # two flows, one client id: only a flow's own consumer/producer client.id can do it
                out.errors.append(
                    Diagnostic.error(
                        address,
                        f"flows {want[address].flow} and {flow.name} would both throttle this client id; "
                        "give each flow its own client.id in replication.consumer/producer "
                        "(or none: kmirror's are unique)",
                    )
                )
                continue
            want[address] = form

    disabled = {f.name for f in desired.flows if not f.enabled}
    flows = {f.name for f in desired.flows}
    records = [r for r in recorded.of_kind(Kind.QUOTA) if r.attributes.get("flow") not in disabled]
    owned = {r.address: QuotaForm.model_validate(dict(r.attributes)) for r in records}
    pending = {r.address for r in records if r.pending}  # an apply was killed before it confirmed the create
    for address in sorted(want.keys() | owned.keys()):
        wanted, mine = want.get(address), owned.get(address)
        either = wanted or mine
        assert either is not None  # the address is wanted or owned
        cluster = either.cluster
        read = cluster in live
        recorded_form = None if address in pending else mine  # a pending create may not have happened
        current = _live_form(live[cluster], either) if read else recorded_form
        if wanted is None:
            action = Action.DELETE
            gone = mine is not None and mine.flow not in flows
            reason = f"flow {mine.flow} was removed" if gone and mine else "the flow's throttle was removed"
            # Not read: the recorded form says what to remove. Read and absent: nothing to remove, the delete only
            # withdraws kmirror's record.
            before = current if read else mine
        elif current is None:
            rate = shares.get(address, f"{_rate(wanted)} per second")
            action, reason, before = Action.CREATE, f"throttle the flow to {rate}", None
        elif _rates(current) != _rates(wanted):
            rate = shares.get(address, f"{_rate(wanted)} per second")
            action, reason, before = Action.UPDATE, f"the flow's throttle is now {rate}", current
        elif mine is None or address in pending:
            action, reason, before = Action.UPDATE, "the quota is already set: kmirror records it as its own", current
        else:
            continue
        out.changes.append(QuotaChange(address=address, action=action, before=before, after=wanted, reason=reason))
        if not read:
            unread.add(cluster)
    if unread:
        out.warnings.append(unread_warning(unread))
    return out


def _live_form(quotas: Mapping[str, Mapping[str, float]], like: QuotaForm) -> QuotaForm | None:
    """The live quota on `like`'s client id in the form the planner compares (its rate names only), or None."""
    values = quotas.get(like.client_id, {})
    rates = {name: int(values[name]) for name in RATE_NAMES if name in values}
    if not rates:
        return None
    return QuotaForm.model_validate({"cluster": like.cluster, "client_id": like.client_id, "flow": like.flow, **rates})


def _rates(form: QuotaForm) -> dict[str, int]:
    return {name: int(value) for name, value in form.rates().items()}


def _rate(form: QuotaForm) -> str:
    return " and ".join(f"{format_byte_rate(v)}" for v in _rates(form).values())
