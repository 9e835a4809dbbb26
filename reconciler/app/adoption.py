"""What `kmirror import ADDRESS` may adopt: a remote topic or an ACL that is already exactly what a flow would make.

Terraform's `import` takes an existing object under management. Here the object must match what kmirror would
have created, so that adopting it changes nothing on the cluster and the next plan shows no change for it:

- `topic/<cluster>/<name>`: a flow replicates some source topic into it, it exists, and adopting it (the planner's
  own `adopt_existing` rules, so the comparison is the planner's) would change neither its partition count nor
  any config the flow sets, nor leave a replication factor or partition count the planner would warn about.
- `acl/<cluster>/<principal>/<operation>/<topic>`: a flow syncing ACLs into `cluster` wants these
  (host, permission) pairs for that principal, operation and remote topic, and every one of them exists.

The result is the resource's form as an apply would record it. Pure: values in, values out.

Must not: talk to a cluster or to the state topic, or decide anything the planner decides differently.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.errors import KmirrorError
from reconciler.live.model import LiveState
from reconciler.plan.acls import synced_acl
from reconciler.plan.definition import Action, TopicChange
from reconciler.plan.forms import AclForm, TopicForm
from reconciler.plan.topics import plan_remote_topics
from reconciler.resources.addresses import AclAddress, AddressError, Kind, TopicAddress, parse_address
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import DesiredState


class ImportRefusedError(KmirrorError):
    """The resource cannot be adopted as it is (named, with the reason and what to do)."""


@dataclass(frozen=True)
class Adoption:
    """A resource to record as kmirror's: its address, kind and applied form, and notes for the user."""

    address: str
    kind: str
    attributes: TopicForm | AclForm
    notes: tuple[str, ...] = ()


def importable_address(address: str) -> TopicAddress | AclAddress:
    """The typed address of a remote topic or a synced ACL; `ImportRefusedError` for any other address."""
    try:
        parsed = parse_address(address)
    except AddressError:
        parsed = None
    if isinstance(parsed, TopicAddress | AclAddress):
        return parsed
    raise ImportRefusedError(
        f"cannot import {address!r}: import adopts a remote topic (topic/<cluster>/<name>) or a synced ACL "
        "(acl/<cluster>/<principal>/<operation>/<topic>); `kmirror plan` lists the addresses of both"
    )


def adopt(desired: DesiredState, live: LiveState, recorded: RecordedState, address: str) -> Adoption:
    """The `Adoption` of `address`, or `ImportRefusedError` saying why it does not match what the flow would make."""
    parsed = importable_address(address)
    if recorded.owns(address):
        raise ImportRefusedError(
            f"{address} is already in kmirror's state; nothing to import (`kmirror state show {address}`)"
        )
    if parsed.cluster not in desired.clusters:
        raise ImportRefusedError(
            f"cannot import {address}: no cluster '{parsed.cluster}' in the desired state "
            f"(clusters: {', '.join(sorted(desired.clusters))})"
        )
    if isinstance(parsed, TopicAddress):
        return _adopt_topic(desired, live, recorded, parsed)
    return _adopt_acl(desired, live, address, parsed.cluster, parsed.principal, parsed.operation, parsed.topic)


def _adopt_topic(desired: DesiredState, live: LiveState, recorded: RecordedState, parsed: TopicAddress) -> Adoption:
    address = str(parsed)
    adopting = desired.model_copy(
        update={
            "flows": tuple(
                f.model_copy(update={"replication": f.replication.model_copy(update={"adopt_existing": True})})
                for f in desired.flows
            )
        }
    )
    planned = plan_remote_topics(adopting, live, recorded)
    errors = [e for e in planned.errors if e.address == address]
    if errors:
        raise ImportRefusedError(f"cannot import {errors[0]}")
    change = next((c for c in planned.changes if c.address == address), None)
    if change is None:
        raise ImportRefusedError(
            f"cannot import {address}: no enabled flow replicates a source topic into it, so kmirror would not "
            "create it. Import only the remote topics `kmirror plan` wants; check the flows' topics.include and "
            "naming."
        )
    if change.action == Action.CREATE:
        raise ImportRefusedError(
            f"cannot import {address}: the topic does not exist on '{parsed.cluster}'; `kmirror apply` creates it"
        )
    if not isinstance(change, TopicChange) or change.before is None or change.after is None:
        raise ImportRefusedError(f"cannot import {address}: the plan has no update of this topic to compare with")
    before, after = change.before, change.after
    differences = []
    if before.partitions != after.partitions:
        differences.append(f"it has {before.partitions} partitions, the flow would create {after.partitions}")
    configs_before, configs_after = before.configs, after.configs
    for key in sorted(configs_before.keys() | configs_after.keys()):
        if configs_before.get(key) != configs_after.get(key):
            have = "unset" if key not in configs_before else f"{configs_before[key]!r}"
            want = "unset" if key not in configs_after else f"{configs_after[key]!r}"
            differences.append(f"config {key} is {have}, the flow would set {want}")
    mine = [w for w in planned.warnings if w.address == address]
    refusing = [w for w in mine if "partitions" in w.summary or "replication factor" in w.summary]
    differences += [w.summary for w in refusing]
    if differences:
        raise ImportRefusedError(
            f"cannot import {address}: it does not match what the flow would create: "
            + "; ".join(differences)
            + ". Make the topic match (or fix the flow's topic_defaults / sync settings), then import again; "
            "or set `replication.adopt_existing: true` on the flow and let `kmirror apply` align it."
        )
    notes = tuple(str(w) for w in mine if w not in refusing)
    return Adoption(address, Kind.TOPIC, after, notes)


def _adopt_acl(
    desired: DesiredState, live: LiveState, address: str, cluster: str, principal: str, operation: str, topic: str
) -> Adoption:
    wanted: set[tuple[str, str]] = set()
    syncing = False
    for flow in desired.enabled_flows:
        if flow.target != cluster or not flow.sync.acls:
            continue
        syncing = True
        source = live.clusters[flow.source]
        remote_of = flow.remote_topics(source.topics)
        for entry in source.acls or ():
            synced = synced_acl(entry)
            if synced is None or remote_of.get(entry.resource_name) != topic:
                continue
            if entry.principal == principal and synced[0] == operation:
                wanted.add((entry.host, synced[1]))
    if not syncing:
        raise ImportRefusedError(f"cannot import {address}: no enabled flow syncs ACLs into '{cluster}'")
    if live.clusters[cluster].acls is None:
        raise ImportRefusedError(
            f"cannot import {address}: the ACLs of '{cluster}' cannot be read (no authorizer, or no DESCRIBE "
            "permission on the cluster)"
        )
    if not wanted:
        raise ImportRefusedError(
            f"cannot import {address}: the flows would create no {operation} ACL for {principal} on topic {topic} "
            "(no synced source ACL maps to it: MM2 syncs literal topic ACLs, not ALLOW WRITE)"
        )
    current = {
        (e.host, e.permission)
        for e in live.clusters[cluster].acls or ()
        if e.resource_type == "TOPIC"
        and e.pattern_type == "LITERAL"
        and (e.principal, e.operation, e.resource_name) == (principal, operation, topic)
    }
    missing = sorted(wanted - current)
    if missing:
        raise ImportRefusedError(
            f"cannot import {address}: it does not match what the flow would create: missing "
            + ", ".join(f"{permission} from host {host}" for host, permission in missing)
            + "; `kmirror apply` creates what is missing"
        )
    form = AclForm.model_validate(
        {
            "cluster": cluster,
            "principal": principal,
            "operation": operation,
            "topic": topic,
            "pattern_type": "LITERAL",
            "entries": [{"host": h, "permission": p} for h, p in sorted(current)],
            "managed": [{"host": h, "permission": p} for h, p in sorted(wanted)],
        }
    )
    return Adoption(address, Kind.ACL, form)
