"""Planning of ACLs on remote topics, with MM2's ACL-sync semantics.

MM2 (MirrorSourceConnector.syncTopicAcls) copies literal TOPIC ACLs only; an ALLOW WRITE is not synced (only
the replication job writes a remote topic); ALLOW ALL becomes ALLOW READ; DENY is copied; principal and host
are kept; the resource becomes the remote topic name. kmirror adds: it never deletes an ACL it did not create,
and deletes one it created only when `prune.acls` is on. One address is (cluster, principal, operation,
topic); its `after.entries` are all (host, permission) pairs the topic will have for that principal and
operation, and `after.managed` those kmirror owns. The ACLs on the topics of a disabled flow are left as they
are (the flow keeps its topics). Pure: values in, values out.
"""

from __future__ import annotations

from collections import defaultdict

from reconciler.errors import Diagnostic
from reconciler.live.model import AclEntry, LiveState
from reconciler.plan.definition import AclChange, Action
from reconciler.plan.forms import AclForm, AclGrant
from reconciler.plan.topics import TopicPlan
from reconciler.resources.addresses import Kind, acl_address
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import DesiredState

Key = tuple[str, str, str, str]  # cluster, principal, operation, topic
HostPermission = tuple[str, str]


def synced_acl(entry: AclEntry) -> tuple[str, str] | None:
    """(operation, permission) MM2 gives the remote topic for a source ACL, or None if it is not synced."""
    if entry.resource_type != "TOPIC" or entry.pattern_type != "LITERAL":
        return None
    if entry.permission == "ALLOW" and entry.operation == "WRITE":
        return None
    if entry.permission == "ALLOW" and entry.operation == "ALL":
        return "READ", "ALLOW"
    return entry.operation, entry.permission


def plan_acls(desired: DesiredState, live: LiveState, recorded: RecordedState) -> TopicPlan:
    out = TopicPlan()
    want: dict[Key, set[HostPermission]] = defaultdict(set)
    readable_targets: set[str] = set()
    for flow in desired.enabled_flows:
        if not flow.sync.acls:
            continue
        source, target = live.clusters[flow.source], live.clusters[flow.target]
        if source.acls is None:
            out.warnings.append(
                Diagnostic.warning(
                    None,  # about the flow's ACL sync as a whole, shown whatever --target names
                    f"flow {flow.name}: the ACLs of '{flow.source}' cannot be read (no authorizer, or no DESCRIBE "
                    "permission on the cluster); ACL sync skipped.",
                )
            )
            continue
        if target.acls is None:
            out.warnings.append(
                Diagnostic.warning(
                    None, f"flow {flow.name}: '{flow.target}' has no authorizer (or denies DESCRIBE); ACL sync skipped."
                )
            )
            continue
        readable_targets.add(flow.target)
        remote_of = flow.remote_topics(source.topics)
        for entry in source.acls:
            if entry.resource_name not in remote_of:
                continue
            synced = synced_acl(entry)
            if synced is None:
                continue
            operation, permission = synced
            key = (flow.target, entry.principal, operation, remote_of[entry.resource_name])
            want[key].add((entry.host, permission))

    live_entries: dict[Key, set[HostPermission]] = defaultdict(set)
    for cluster in readable_targets:
        for e in live.clusters[cluster].acls or ():
            if e.resource_type == "TOPIC" and e.pattern_type == "LITERAL":
                live_entries[(cluster, e.principal, e.operation, e.resource_name)].add((e.host, e.permission))

    owned: dict[Key, set[HostPermission]] = {}
    for res in recorded.of_kind(Kind.ACL):
        a = res.attributes
        owned[(a["cluster"], a["principal"], a["operation"], a["topic"])] = {
            (e["host"], e["permission"]) for e in a.get("managed", ())
        }

    kept = disabled_flow_topics(desired, recorded)
    for key in sorted(want.keys() | owned.keys()):
        cluster, _principal, operation, topic = key
        if cluster not in readable_targets or (key not in want and (cluster, topic) in kept):
            continue  # not read, or on a topic a disabled flow keeps (its ACLs stay as they are)
        address = acl_address(*key)
        current = live_entries.get(key, set())
        wanted = want.get(key, set())
        mine = owned.get(key, set())
        stale = (mine & current) - wanted
        if stale and not desired.prune.acls:
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"{len(stale)} ACL(s) kmirror created are no longer synced; kept because prune.acls is off.",
                )
            )
            wanted = wanted | stale
        after = wanted | (current - mine)  # ACLs kmirror did not create stay, always
        if after == current:
            continue  # an identical ACL made by hand is not claimed: kmirror never deletes what it did not create
        managed = (mine & after) | (after - current)
        if not current:
            action = Action.CREATE
        elif not after:
            action = Action.DELETE
        else:
            action = Action.UPDATE
        added, removed = after - current, current - after
        parts = [f"+{len(added)} {'/'.join(sorted({p for _, p in added}))}"] if added else []
        parts += [f"-{len(removed)}"] if removed else []
        out.changes.append(
            AclChange(
                address=address,
                action=action,
                before=_form(key, current, None) if current else None,
                after=_form(key, after, managed) if after else None,
                reason=f"ACL sync from the source topic ({', '.join(parts) or 'ownership'})",
            )
        )
    return out


def disabled_flow_topics(desired: DesiredState, recorded: RecordedState) -> set[tuple[str, str]]:
    """(cluster, topic) of every remote topic kmirror recorded for a flow that is now disabled."""
    disabled = {f.name for f in desired.flows if not f.enabled}
    kept = set()
    for res in recorded.of_kind(Kind.TOPIC):
        origin = res.attributes.get("source")
        if isinstance(origin, dict) and origin.get("flow") in disabled:
            kept.add((str(res.attributes["cluster"]), str(res.attributes["name"])))
    return kept


def _form(key: Key, entries: set[HostPermission], managed: set[HostPermission] | None) -> AclForm:
    cluster, principal, operation, topic = key
    return AclForm(
        cluster=cluster,
        principal=principal,
        operation=operation,
        topic=topic,
        entries=tuple(AclGrant(host=h, permission=p) for h, p in sorted(entries)),
        managed=None if managed is None else tuple(AclGrant(host=h, permission=p) for h, p in sorted(managed)),
    )
