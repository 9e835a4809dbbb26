"""Which topics and groups a flow replicates: MM2's filter semantics in Python, and the same rule as a Java regex.

MM2 joins a filter's regexes with `|` and requires the *whole* name to match (`Pattern.matcher(..).matches()`).
An empty include list matches nothing. A topic is replicated when it is included (or is a heartbeats topic),
not excluded, not internal (`__*`, `.*`, `*.internal`, `*-internal`) and not a cycle (it did not come from
the flow's target). kmirror's own topics (`_kmirror.*`) are never replicated, its exactly-once groups (`kmirror-eos.*`)
never translated.

A name is chosen by whoever can create a topic or group on the source, so no name may hang plan, the
checkpointer or the job. In Python the filters run on RE2 (`google-re2`), whose matching time is linear in the
name whatever the pattern: no backtracking at all. RE2 has no lookarounds, back-references, possessive repeats or
atomic groups, so a filter may not use them (`spec.regex` says so at the pattern's line); everything else a
filter writes means the same in RE2, java.util.regex and MM2. The job's `subscribePattern` is matched by Java's
backtracking engine, which kmirror cannot swap there; `policy.backtracking` refuses every pattern that could make
it slow, and this module refuses them too (values that skipped the loader).

`subscribe_pattern` renders that whole decision as one anchored Java regex for Spark's `subscribePattern`.
Spark needs the anchors: its admin-based partition discovery (`SubscribePatternStrategy`) keeps topics for which
`topicRegex.findFirstIn(name)` is defined — a substring search — while the consumer's `subscribe(Pattern)` uses
`matches()`. With `^...$` both agree with MM2. The regex only uses constructs that java.util.regex and Python's
`re` read identically (non-capturing groups, negative lookaheads, backslash-escaped punctuation), so tests can
check it against `should_replicate_topic` in Python.

Pure: no I/O, no Kafka or Spark imports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from reconciler.core.policy.backtracking import catastrophic_backtracking
from reconciler.core.policy.naming import ReplicationPolicy, policy_for

KMIRROR_INTERNAL_TOPIC_PATTERN = r"_kmirror\..*"
"""kmirror's own topics (the state topic and friends); never replicated whatever the filters say."""

KMIRROR_EOS_GROUP_PREFIX = "kmirror-eos."
"""The groups exactly-once jobs commit their source positions to on the target (`<prefix><state topic>.<flow>`):
never translated whatever the filters say (their offsets are source offsets held against remote topics)."""


def eos_group(state_topic: str, flow: str) -> str:
    """The group on the target that holds an exactly-once flow's source positions: `kmirror-eos.<state topic>.<flow>`
    (`flow`: the name its job was first deployed under; a `moved:` rename keeps it).

    Its committed offsets are against the remote topics' partitions and are SOURCE offsets (the next one to copy);
    kmirror never translates a `kmirror-eos.*` group, and nothing should consume with it."""
    return f"{KMIRROR_EOS_GROUP_PREFIX}{state_topic}.{flow}"


@dataclass(frozen=True)
class PatternFilter:
    """An include/exclude pair of regex lists with MM2's full-match semantics."""

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    def matches(self, name: str) -> bool:
        include, exclude = _compiled(self.include, self.exclude)
        if include is None or include.fullmatch(name) is None:
            return False
        return exclude is None or exclude.fullmatch(name) is None


class LinearMatcher(Protocol):
    """A compiled RE2 pattern: `fullmatch` takes time linear in the name."""

    def fullmatch(self, text: str) -> object | None: ...


def _re2_options() -> object:
    options = re2.Options()
    options.log_errors = False  # RE2 would print its own parse errors on stderr; ours are located and clearer
    return options


_RE2_OPTIONS = _re2_options()


def linear_engine_error(pattern: str) -> str | None:
    """Why RE2 cannot compile `pattern` (its own words), or None when it can."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    except (TypeError, ValueError, OverflowError) as exc:
        return str(exc)
    return None


def compile_linear(pattern: str) -> LinearMatcher:
    """`pattern` compiled by RE2 (ValueError when RE2 cannot read it): for matching names that anyone can choose."""
    error = linear_engine_error(pattern)
    if error is not None:
        raise ValueError(f"regex {pattern!r} is not supported by RE2 (kmirror's linear-time matcher): {error}")
    matcher: LinearMatcher = re2.compile(pattern, _RE2_OPTIONS)
    return matcher


@functools.lru_cache(maxsize=1024)
def _compiled(include: tuple[str, ...], exclude: tuple[str, ...]) -> tuple[LinearMatcher | None, LinearMatcher | None]:
    return _join(include), _join(exclude)


def _join(patterns: Sequence[str]) -> LinearMatcher | None:
    # Like MM2's compilePatternList; each pattern in its own group so an alternation inside one stays inside it.
    if not patterns:
        return None
    for pattern in patterns:
        # The loader refuses these with a located error; this guards values that reach us some other way (the
        # same patterns go to the job's java.util.regex, which backtracks).
        problems = catastrophic_backtracking(pattern)
        if problems:
            raise ValueError(f"filter regex {pattern!r} {problems[0][0]}; {problems[0][1]}")
    return compile_linear("|".join(f"(?:{p})" for p in patterns))


_KMIRROR_INTERNAL = re.compile(KMIRROR_INTERNAL_TOPIC_PATTERN)


def should_replicate_topic(
    topic: str,
    *,
    topics: PatternFilter,
    policy: ReplicationPolicy,
    target_alias: str,
    replicate_heartbeats: bool = True,
) -> bool:
    """MM2's MirrorSourceConnector.shouldReplicateTopic, plus kmirror's own topics excluded."""
    if _KMIRROR_INTERNAL.fullmatch(topic):
        return False
    wanted = topics.matches(topic) or (replicate_heartbeats and policy.is_heartbeats_topic(topic))
    return wanted and not policy.is_internal_topic(topic) and not policy.is_cycle(topic, target_alias)


def should_replicate_group(group: str, *, groups: PatternFilter) -> bool:
    """MM2's DefaultGroupFilter.shouldReplicateGroup, plus kmirror's exactly-once groups excluded."""
    return groups.matches(group) and not group.startswith(KMIRROR_EOS_GROUP_PREFIX)


def java_subscribe_pattern(
    *,
    topics: PatternFilter,
    policy: ReplicationPolicy,
    target_alias: str,
    replicate_heartbeats: bool = True,
) -> str:
    """One anchored Java regex equivalent to `should_replicate_topic` for every legal topic name."""
    lookaheads = [f"(?!{KMIRROR_INTERNAL_TOPIC_PATTERN}$)"]
    if topics.exclude:
        lookaheads.append(f"(?!{_alternation(topics.exclude)}$)")
    lookaheads.append(f"(?!{policy.java_internal_regex()}$)")
    cycle = policy.java_cycle_regex(target_alias)
    if cycle is not None:
        lookaheads.append(f"(?!{cycle}$)")
    wanted = list(topics.include)
    if replicate_heartbeats:
        wanted.append(policy.java_heartbeats_regex())
    if not wanted:
        # MM2: an empty include list matches nothing; so does a lookahead that always fails.
        return "^(?!)$"
    return "^" + "".join(lookaheads) + _alternation(wanted) + "$"


def _alternation(patterns: Sequence[str]) -> str:
    return "(?:" + "|".join(f"(?:{p})" for p in patterns) + ")"


# -- convenience for flow-shaped objects (the spec's FlowSpec satisfies these protocols) ----------------------


class FilterLike(Protocol):
    @property
    def include(self) -> Sequence[str]: ...

    @property
    def exclude(self) -> Sequence[str]: ...


class NamingLike(Protocol):
    @property
    def policy(self) -> str: ...

    @property
    def separator(self) -> str: ...

    @property
    def template(self) -> str | None: ...


class HeartbeatsLike(Protocol):
    @property
    def enabled(self) -> bool: ...


class FlowLike(Protocol):
    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def topics(self) -> FilterLike: ...

    @property
    def groups(self) -> FilterLike: ...

    @property
    def naming(self) -> NamingLike: ...

    @property
    def heartbeats(self) -> HeartbeatsLike: ...


def flow_policy(flow: FlowLike) -> ReplicationPolicy:
    """The naming policy of a flow."""
    naming = flow.naming
    if naming.policy not in ("prefix", "identity", "template"):
        raise ValueError(f"unknown naming policy {naming.policy!r} (use prefix, identity or template)")
    return _policy(naming.policy, naming.separator, naming.template)


@functools.lru_cache(maxsize=256)
def _policy(policy: str, separator: str, template: str | None) -> ReplicationPolicy:
    return policy_for(policy, separator=separator, template=template)  # type: ignore[arg-type]  # checked by flow_policy


def _filter(spec: FilterLike) -> PatternFilter:
    return PatternFilter(tuple(spec.include), tuple(spec.exclude))


def topic_matches(flow: FlowLike, topic: str) -> bool:
    """Does `flow` replicate source topic `topic`? (MM2 full-match semantics, internal topics and cycles out.)"""
    return topic_matcher(flow)(topic)


def topic_matcher(flow: FlowLike) -> Callable[[str], bool]:
    """`topic_matches` for one flow, with its filter and policy looked up once: for deciding thousands of topics."""
    topics, policy = _filter(flow.topics), flow_policy(flow)
    target_alias, replicate_heartbeats = flow.target, flow.heartbeats.enabled

    def matches(topic: str) -> bool:
        return should_replicate_topic(
            topic,
            topics=topics,
            policy=policy,
            target_alias=target_alias,
            replicate_heartbeats=replicate_heartbeats,
        )

    return matches


def group_matches(flow: FlowLike, group: str) -> bool:
    """Does `flow` translate the offsets of consumer group `group`?"""
    return should_replicate_group(group, groups=_filter(flow.groups))


def subscribe_pattern(flow: FlowLike) -> str:
    """The anchored Java regex for Spark's `subscribePattern` option of this flow's replication job."""
    return java_subscribe_pattern(
        topics=_filter(flow.topics),
        policy=flow_policy(flow),
        target_alias=flow.target,
        replicate_heartbeats=flow.heartbeats.enabled,
    )


def remote_topic(flow: FlowLike, topic: str) -> str:
    """The name `topic` gets on the flow's target."""
    return flow_policy(flow).remote_topic(flow.source, topic)


def spark_remote_topic_expr(flow: FlowLike, column: str = "topic") -> str:
    """The Spark SQL expression computing the remote topic name from the source `topic` column."""
    return flow_policy(flow).spark_remote_topic_expr(flow.source, column)
