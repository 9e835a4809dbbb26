"""Semantic checks across the whole desired state, each reported with its location in the file.

What the models cannot see field by field: references to undeclared clusters, a flow into its own source,
duplicate flow names, filter regexes that do not compile or mean different things in Java and Python, secrets
written inline, cluster aliases that break prefix naming, replication cycles that naming cannot stop (identity
and templates without `{source}`; prefix naming is cycle-safe as in MM2), and flows whose naming sends different
source topics to one remote topic. What can be decided from the file alone is an error; what depends on which
topics exist is a warning here and a plan-time check later.

Pure: no I/O, no Kafka.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.spec import transactions
from reconciler.spec.client_config import client_problems
from reconciler.spec.issues import FieldPath, Severity, SpecIssue
from reconciler.spec.models import DesiredState, FlowSpec
from reconciler.spec.regex import literal_prefix, literal_text, regex_problems
from reconciler.spec.schema_registry import registry_problems
from reconciler.spec.secrets import SecretRef, is_sensitive_key
from reconciler.spec.yaml_source import Locations


@dataclass
class _Report:
    file: str
    locations: Locations | None
    issues: list[SpecIssue]

    def add(
        self, path: FieldPath, message: str, hint: str, severity: Severity = "error", *, at_key: bool = False
    ) -> None:
        if self.locations is None:
            line = column = 0
        else:
            mark = self.locations.key(path) if at_key else self.locations.value(path)
            line, column = mark.line, mark.column
        self.issues.append(SpecIssue(self.file, line, column, path, message, hint, severity))

    def line_of(self, path: FieldPath) -> int:
        return 0 if self.locations is None else self.locations.value(path).line


def validate_state(
    state: DesiredState, *, locations: Locations | None = None, file: str = "kmirror.yaml"
) -> list[SpecIssue]:
    """Every semantic issue (errors and warnings) in `state`, located when `locations` is given."""
    report = _Report(file, locations, [])
    _check_clusters(state, report)
    _check_state_cluster(state, report)
    _check_spark(state, report)
    _check_flows(state, report)
    _check_moved(state, report)
    _check_cycles(state, report)
    _check_collisions(state, report)
    return report.issues


# -- clusters, state, spark --------------------------------------------------------------------------------


def _check_clusters(state: DesiredState, report: _Report) -> None:
    for alias, cluster in state.clusters.items():
        path: FieldPath = ("clusters", alias, "client")
        if "bootstrap.servers" in cluster.client:
            report.add(
                (*path, "bootstrap.servers"),
                "bootstrap.servers belongs in bootstrap_servers",
                f"move it to clusters.{alias}.bootstrap_servers",
                at_key=True,
            )
        _check_inline_secrets(cluster.client, path, report)
        if cluster.schema_registry is not None:
            for issue in registry_problems(cluster.schema_registry):
                report.add(("clusters", alias, "schema_registry", *issue.key), issue.message, issue.hint)
        for problem in client_problems(cluster.client, cluster.bootstrap_servers):
            report.add((*path, problem.key), problem.message, problem.hint, at_key=True)


def _check_inline_secrets(properties: Mapping[str, object], path: FieldPath, report: _Report) -> None:
    for key, value in properties.items():
        if not is_sensitive_key(key) or isinstance(value, SecretRef):
            continue
        if key.endswith("jaas.config") and "password" not in str(value).lower():
            continue
        report.add(
            (*path, key),
            "a secret is written inline; secrets must not be kept in the file",
            "reference it instead: ${env:NAME} or ${file:PATH}",
        )


#: Hadoop filesystem settings whose credentials a YARN job must take from the cluster, not from kmirror's file.
_STORAGE_PREFIXES = ("spark.hadoop.fs.s3a.", "spark.hadoop.fs.gs.", "spark.hadoop.fs.azure.")


def _check_yarn_storage_credentials(conf: Mapping[str, object], report: _Report) -> None:
    """With deploy 'yarn', object-store credentials come from the cluster: a reference would resolve in the YARN
    container (the NodeManager's environment and disk, not kmirror's), and a resolved value in the submission would
    sit in the application's launch context, which YARN keeps and shows."""
    for key, value in conf.items():
        if not key.startswith(_STORAGE_PREFIXES) or not is_sensitive_key(key) or not isinstance(value, SecretRef):
            continue
        report.add(
            ("spark", "conf", key),
            "with deploy 'yarn' an object-store credential cannot come from kmirror: a reference resolves in the YARN "
            "container (the NodeManager's environment and disk), and kmirror never puts a resolved secret in a "
            "submission",
            "take it from the cluster: leave it out for the nodes' instance profile or core-site.xml, or store it in a "
            "Hadoop credential provider on HDFS (`hadoop credential create fs.s3a.secret.key -provider "
            "jceks://hdfs@namenode:8020/user/<user>/s3.jceks`) and name that file in "
            "spark.hadoop.fs.s3a.security.credential.provider.path (docs/checkpoint-storage.md)",
            at_key=True,
        )


def _check_state_cluster(state: DesiredState, report: _Report) -> None:
    if state.state.cluster not in state.clusters:
        report.add(
            ("state", "cluster"),
            f"unknown cluster '{state.state.cluster}'",
            _declared_hint(state.state.cluster, state.clusters),
        )


def _check_spark(state: DesiredState, report: _Report) -> None:
    _check_inline_secrets(state.spark.conf, ("spark", "conf"), report)
    if state.spark.deploy == "yarn":
        _check_yarn_storage_credentials(state.spark.conf, report)
    key = state.spark.rest_jws_secret_key
    if key is not None and not isinstance(key, SecretRef):
        report.add(
            ("spark", "rest_jws_secret_key"),
            "the REST server's signing key is written inline",
            "reference it instead: rest_jws_secret_key: ${env:SPARK_REST_JWS_KEY} (or ${file:path})",
        )
    if state.spark.deploy == "standalone" and state.spark.rest_url is None:
        report.add(
            ("spark",),
            "deploy 'standalone' needs rest_url, the REST submission server",
            "add rest_url: http://<master-host>:6066",
        )


def _declared_hint(name: str, clusters: Mapping[str, object]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(clusters), n=1)
    declared = ", ".join(sorted(clusters))
    if close:
        return f"did you mean '{close[0]}'? declared clusters: {declared}"
    return f"declare it under clusters:, or use one of: {declared}"


# -- flows --------------------------------------------------------------------------------------------------


def _check_moved(state: DesiredState, report: _Report) -> None:
    names = {f.name for f in state.flows}
    seen_from: set[str] = set()
    for index, moved in enumerate(state.moved):
        base: FieldPath = ("moved", index)
        if moved.to not in names:
            report.add((*base, "to"), f"no flow named '{moved.to}'", "`to` is the flow's new name, as flows[] has it")
        if moved.from_ in names:
            report.add(
                (*base, "from"),
                f"flow '{moved.from_}' still exists, so it was not renamed",
                "`from` is the old name, which no flow of the file has any more",
            )
        if moved.from_ in seen_from:
            report.add((*base, "from"), f"flow '{moved.from_}' is moved twice", "move a flow to one new name")
        seen_from.add(moved.from_)


def _check_flows(state: DesiredState, report: _Report) -> None:
    first_index: dict[str, int] = {}
    for index, flow in enumerate(state.flows):
        base: FieldPath = ("flows", index)
        if flow.name in first_index:
            other = first_index[flow.name]
            report.add(
                (*base, "name"),
                f"flow name '{flow.name}' is already used by flows[{other}] "
                f"(line {report.line_of(('flows', other, 'name'))})",
                "give every flow a unique name; it names its job and its state",
            )
        else:
            first_index[flow.name] = index
        for end in ("source", "target"):
            alias = getattr(flow, end)
            if alias not in state.clusters:
                report.add((*base, end), f"unknown cluster '{alias}'", _declared_hint(alias, state.clusters))
        if flow.source == flow.target:
            report.add(
                (*base, "target"),
                f"flow '{flow.name}' replicates cluster '{flow.source}' into itself",
                "a flow needs two different clusters; to copy topics within one cluster use another tool",
            )
        _check_filters(flow, base, report)
        _check_naming(flow, base, report)
        _check_inline_secrets(flow.replication.producer, (*base, "replication", "producer"), report)
        _check_inline_secrets(flow.replication.consumer, (*base, "replication", "consumer"), report)
        _check_transactions(state, flow, base, report)
        if flow.sync.schemas:
            for end in ("source", "target"):
                alias = getattr(flow, end)
                if alias in state.clusters and state.clusters[alias].schema_registry is None:
                    report.add(
                        (*base, "sync", "schemas"),
                        f"sync.schemas needs the schema registry of the {end} cluster '{alias}'",
                        f"add clusters.{alias}.schema_registry: {{url: ...}}, or set sync.schemas: false",
                    )
        if flow.sync.group_offsets and not flow.offsets.emit_checkpoints:
            report.add(
                (*base, "sync", "group_offsets"),
                "group offsets are translated from checkpoints, but offsets.emit_checkpoints is false",
                "set offsets.emit_checkpoints: true, or sync.group_offsets: false",
            )


def _check_transactions(state: DesiredState, flow: FlowSpec, base: FieldPath, report: _Report) -> None:
    """An exactly-once flow's transaction interval must leave its commit room within the transaction timeout."""
    if flow.replication.delivery != "exactly_once":
        return
    interval = transactions.whole_ms(
        state.spark.conf.get(transactions.TRANSACTION_INTERVAL_SETTING, transactions.DEFAULT_TRANSACTION_INTERVAL_MS)
    )
    timeout = transactions.transaction_timeout_ms(flow.replication.producer)
    if interval is None or timeout is None:
        return  # not a number: the models say so; a reference: resolved only where the job runs
    problem = transactions.interval_problem(interval, timeout)
    if problem is not None:
        report.add((*base, "replication", "delivery"), problem, transactions.interval_hint(interval))


def _check_filters(flow: FlowSpec, base: FieldPath, report: _Report) -> None:
    lists: list[tuple[FieldPath, Sequence[str]]] = [
        ((*base, "topics", "include"), flow.topics.include),
        ((*base, "topics", "exclude"), flow.topics.exclude),
        ((*base, "groups", "include"), flow.groups.include),
        ((*base, "groups", "exclude"), flow.groups.exclude),
        ((*base, "sync", "config_exclude"), flow.sync.config_exclude),
        ((*base, "sync", "schema_subjects_exclude"), flow.sync.schema_subjects_exclude),
    ]
    for path, patterns in lists:
        for i, pattern in enumerate(patterns):
            for problem in regex_problems(pattern):
                report.add((*path, i), f"regex '{pattern}': {problem.message}", problem.hint, problem.severity)
    if not flow.topics.include and not flow.heartbeats.enabled:
        report.add(
            (*base, "topics", "include"),
            "topics.include is empty, so this flow replicates no topic",
            "list the topics to replicate, e.g. include: ['orders\\\\..*']",
            "warning",
        )


def _check_naming(flow: FlowSpec, base: FieldPath, report: _Report) -> None:
    if flow.naming.policy == "identity":
        return
    separator = flow.naming.separator
    if flow.naming.policy == "template":
        template = flow.naming.template or ""
        if "{source}" not in template:
            return
    for end in ("source", "target"):
        alias = getattr(flow, end)
        if separator in alias:
            report.add(
                (*base, end),
                f"cluster alias '{alias}' contains the naming separator '{separator}', so remote topics cannot "
                "be traced back to their source and cycles cannot be detected",
                "choose a separator that no cluster alias contains (naming.separator), or rename the cluster",
            )


# -- cycles -------------------------------------------------------------------------------------------------


def _flow_cycles(flows: Sequence[FlowSpec]) -> list[list[int]]:
    """Elementary cycles of the flow graph, as lists of flow indexes, each cycle once."""
    by_source: dict[str, list[int]] = {}
    for i, flow in enumerate(flows):
        by_source.setdefault(flow.source, []).append(i)
    clusters = sorted({f.source for f in flows} | {f.target for f in flows})
    order = {c: n for n, c in enumerate(clusters)}
    cycles: list[list[int]] = []

    def walk(start: str, node: str, path: list[int], visited: set[str]) -> None:
        for index in by_source.get(node, []):
            target = flows[index].target
            if target == start:
                cycles.append([*path, index])
            elif target not in visited and order[target] > order[start]:
                walk(start, target, [*path, index], visited | {target})

    for start in clusters:
        walk(start, start, [], {start})
    return cycles


def _check_cycles(state: DesiredState, report: _Report) -> None:
    flows = [f for f in state.flows if f.enabled and f.source != f.target]
    indexes = {id(f): i for i, f in enumerate(state.flows)}
    for cycle in _flow_cycles(flows):
        members = [flows[i] for i in cycle]
        unsafe = [f for f in members if not f.policy().detects_cycles]
        if not unsafe:
            continue  # prefix naming everywhere: MM2's own cycle detection stops every loop
        verdict = _cycle_verdict(members)
        if verdict == "safe":
            continue
        route = " → ".join([members[0].source, *[f.target for f in members]])
        names = ", ".join(f"'{f.name}'" for f in members)
        first = unsafe[0]
        path: FieldPath = ("flows", indexes[id(first)], "naming", "policy")
        if report.locations is not None and not report.locations.has(path):
            path = ("flows", indexes[id(first)])
        how = "names topics without their source" if first.naming.policy != "identity" else "uses identity naming"
        certainty = "records are replicated" if verdict == "loops" else "records can be replicated"
        report.add(
            path,
            f"replication cycle {route} through flows {names}: '{first.name}' {how}, so {certainty} around the "
            "cycle forever (MM2 cannot detect this either)",
            "use naming: prefix on at least one flow of the cycle, or give the flows topic filters that cannot "
            "match the same topics (literal names, or different literal prefixes such as 'east\\..*' and "
            "'west\\..*')",
        )


def _cycle_verdict(members: Sequence[FlowSpec]) -> str:
    """'safe', 'loops' (proven), or 'may-loop' (cannot be ruled out from the file)."""
    for start, flow in enumerate(members):
        literals = _literal_includes(flow)
        if literals is None:
            continue
        return _simulate([*members[start:], *members[:start]], literals)
    if all(f.naming.policy == "identity" for f in members):
        for a, b in itertools.combinations(members, 2):
            if _provably_disjoint(a.topics.include, b.topics.include):
                return "safe"
    for i, flow in enumerate(members):
        if _cannot_feed(flow, members[(i + 1) % len(members)]):
            return "safe"  # the names this flow produces are never taken by the next: the cycle is broken here
    return "may-loop"


_TOPIC_MARK = "kmirror-topic-mark"


def _produced_prefixes(flow: FlowSpec) -> list[str]:
    """Literal prefixes, one of which every remote topic name `flow` produces starts with."""
    remote = flow.remote_topic(_TOPIC_MARK)
    head = remote.split(_TOPIC_MARK, 1)[0] if _TOPIC_MARK in remote else ""
    if head:
        return [head]  # prefix naming ("<source>."), or a template with text before the topic
    # identity (or a template starting with the topic): names start like the topics the flow's filter takes
    return [literal_text(p) or literal_prefix(p) for p in flow.topics.include]


def _cannot_feed(flow: FlowSpec, after: FlowSpec) -> bool:
    """Whether no name `flow` produces can match a topic filter of `after` (which replicates from its target)."""
    for produced in _produced_prefixes(flow):
        for pattern in after.topics.include:
            literal = literal_text(pattern)
            if literal is not None:
                if literal.startswith(produced):
                    return False
                continue
            prefix = literal_prefix(pattern)
            if prefix.startswith(produced) or produced.startswith(prefix):
                return False
    return True


def _simulate(members: Sequence[FlowSpec], start: Iterable[str]) -> str:
    """Push literal topic names once around the cycle: any that the first flow takes again loop ('loops')."""
    names = frozenset(start)
    for flow in members:
        names = frozenset(flow.remote_topic(t) for t in names if flow.topic_matches(t))
    return "loops" if any(members[0].topic_matches(n) for n in names) else "safe"


def _literal_includes(flow: FlowSpec) -> set[str] | None:
    names = set()
    for pattern in flow.topics.include:
        literal = literal_text(pattern)
        if literal is None:
            return None
        names.add(literal)
    return names


def _provably_disjoint(a: Sequence[str], b: Sequence[str]) -> bool:
    return all(_alternatives_disjoint(pa, pb) for pa, pb in itertools.product(a, b))


def _alternatives_disjoint(a: str, b: str) -> bool:
    la, lb = literal_text(a), literal_text(b)
    if la is not None and lb is not None:
        return la != lb
    pa = la if la is not None else literal_prefix(a)
    pb = lb if lb is not None else literal_prefix(b)
    if la is not None:
        return not la.startswith(pb)
    if lb is not None:
        return not lb.startswith(pa)
    return not (pa.startswith(pb) or pb.startswith(pa))


# -- remote-name collisions ---------------------------------------------------------------------------------


def _check_collisions(state: DesiredState, report: _Report) -> None:
    indexed = [(i, f) for i, f in enumerate(state.flows) if f.enabled and f.source != f.target]
    for (_ia, a), (ib, b) in itertools.combinations(indexed, 2):
        if a.target != b.target or (a.source == b.source and a.naming == b.naming):
            continue  # flows with one source and one naming split topics; overlaps there are plain duplicates
        collision = _definite_collision(a, b)
        path: FieldPath = ("flows", ib, "naming")
        if report.locations is not None and not report.locations.has(path):
            path = ("flows", ib)
        if collision is not None:
            topic_a, topic_b, remote = collision
            report.add(
                path,
                f"flows '{a.name}' and '{b.name}' both write remote topic '{remote}' on '{a.target}' "
                f"(from '{a.source}:{topic_a}' and '{b.source}:{topic_b}')",
                "use naming: prefix on one of them, or exclude the topic from one flow",
            )
        elif _may_collide(a, b):
            report.add(
                path,
                f"flows '{a.name}' and '{b.name}' may write the same remote topics on '{a.target}' "
                f"(their naming and topic filters overlap); the plan will refuse any topic that collides",
                "use naming: prefix on one of them, or make their topic filters disjoint",
                "warning",
            )


def _definite_collision(a: FlowSpec, b: FlowSpec) -> tuple[str, str, str] | None:
    for first, second, swapped in ((a, b, False), (b, a, True)):
        literals = _literal_includes(first)
        if literals is None:
            continue
        for topic in sorted(literals):
            if not first.topic_matches(topic):
                continue
            remote = first.remote_topic(topic)
            for candidate in _upstream_candidates(second, remote):
                if candidate == topic and first.source == second.source:
                    continue
                if second.topic_matches(candidate) and second.remote_topic(candidate) == remote:
                    return (candidate, topic, remote) if swapped else (topic, candidate, remote)
    return None


def _upstream_candidates(flow: FlowSpec, remote: str) -> list[str]:
    """Source topic names that `flow` could have mapped to `remote`."""
    policy = flow.policy()
    candidates = {remote} if flow.naming.policy == "identity" else set()
    if policy.topic_source(remote) == flow.source or flow.naming.policy == "template":
        upstream = policy.upstream_topic(remote)
        if upstream is not None:
            candidates.add(upstream)
    return sorted(candidates)


def _remote_shapes(flow: FlowSpec) -> list[tuple[str, str, bool]]:
    """(head, tail, exact): every remote topic of the flow is `head + tail` (exact) or starts with head and
    ends with tail."""
    marker = "\x00"
    rendered = flow.remote_topic(marker) if flow.naming.policy != "identity" else marker
    head, _, tail = rendered.partition(marker)
    shapes = []
    for pattern in flow.topics.include:
        literal = literal_text(pattern)
        if literal is not None:
            shapes.append((head + literal, tail, True))
        else:
            shapes.append((head + literal_prefix(pattern), tail, False))
    return shapes


def _may_collide(a: FlowSpec, b: FlowSpec) -> bool:
    for (ha, ta, ea), (hb, tb, eb) in itertools.product(_remote_shapes(a), _remote_shapes(b)):
        if ea and eb:
            continue  # two literal names: _definite_collision already decided
        if ea:
            meets = ha.startswith(hb) and (ha + ta).endswith(tb)
        elif eb:
            meets = hb.startswith(ha) and (hb + tb).endswith(ta)
        else:
            meets = (ha.startswith(hb) or hb.startswith(ha)) and (ta.endswith(tb) or tb.endswith(ta))
        if meets:
            return True
    return False
