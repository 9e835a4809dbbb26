"""Remote-topic naming policies, byte-for-byte the rules of MirrorMaker 2's ReplicationPolicy classes.

- `PrefixPolicy` is MM2's `DefaultReplicationPolicy`: `<source-alias><separator><topic>`, cycle-safe.
- `IdentityPolicy` is MM2's `IdentityReplicationPolicy`: names unchanged (heartbeats still prefixed), so a
  topic's source cannot be told from its name and cycles must be prevented by the topology (plan-time check).
- `TemplatePolicy` renders a template such as `"mirror-{source}-{topic}"`; heartbeats keep MM2's prefix names.

Internal topic names (`heartbeats`, `<alias>.checkpoints.internal`, `mm2-offset-syncs.<alias>.internal`) follow
MM2 exactly, including its use of a custom separator for internal topics (`replication.policy.separator` with
`replication.policy.internal.topic.separator.enabled=true`, MM2's default).

Each policy also renders the same rules as Java regex fragments and as a Spark SQL expression, so the JVM-side
replication job names and filters topics exactly as this Python code does (property tests hold them together).

Pure: no I/O, no Kafka or Spark imports, no import of `reconciler.spec`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

HEARTBEATS_TOPIC = "heartbeats"
DEFAULT_SEPARATOR = "."

PolicyName = Literal["prefix", "identity", "template"]


@runtime_checkable
class ReplicationPolicy(Protocol):
    """What every naming policy answers. Method names follow MM2's `ReplicationPolicy`, in snake_case."""

    @property
    def name(self) -> PolicyName: ...

    @property
    def separator(self) -> str: ...

    @property
    def detects_cycles(self) -> bool:
        """True when `is_cycle` can recognise any topic that came from the target (MM2's loop prevention)."""
        ...

    def remote_topic(self, source_alias: str, topic: str) -> str: ...

    def topic_source(self, topic: str) -> str | None: ...

    def upstream_topic(self, topic: str) -> str | None: ...

    def original_topic(self, topic: str) -> str: ...

    def heartbeats_topic(self) -> str: ...

    def checkpoints_topic(self, cluster_alias: str) -> str: ...

    def offset_syncs_topic(self, cluster_alias: str) -> str: ...

    def is_heartbeats_topic(self, topic: str) -> bool: ...

    def is_checkpoints_topic(self, topic: str) -> bool: ...

    def is_mm2_internal_topic(self, topic: str) -> bool: ...

    def is_internal_topic(self, topic: str) -> bool: ...

    def is_cycle(self, topic: str, target_alias: str) -> bool: ...

    def count_hops(self, topic: str, source_alias: str) -> int: ...

    def java_internal_regex(self) -> str: ...

    def java_heartbeats_regex(self) -> str: ...

    def java_cycle_regex(self, target_alias: str) -> str | None: ...

    def spark_remote_topic_expr(self, source_alias: str, column: str = "topic") -> str: ...


def java_split(text: str, separator: str) -> list[str]:
    """`String.split(Pattern.quote(separator))` as Java does it: leading empties kept, trailing empties dropped."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def sql_string_literal(value: str) -> str:
    """A Spark SQL string literal (default parser: backslash escapes on)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def java_quote(value: str) -> str:
    """Escape a literal for a regex that both java.util.regex and Python `re` read the same way.

    `re.escape` only backslashes non-alphanumeric characters, which Java accepts as literals (unlike `\\Q..\\E`,
    which Python cannot read).
    """
    return re.escape(value)


@dataclass(frozen=True)
class PrefixPolicy:
    """MM2's DefaultReplicationPolicy: remote topics are `<source-alias><separator><topic>`."""

    separator: str = DEFAULT_SEPARATOR
    internal_topic_separator_enabled: bool = True
    name: PolicyName = field(default="prefix", init=False)

    def __post_init__(self) -> None:
        if not self.separator:
            raise ValueError("the separator of a prefix policy must not be empty")

    @property
    def detects_cycles(self) -> bool:
        return True

    # -- naming ---------------------------------------------------------------------------------------------
    def remote_topic(self, source_alias: str, topic: str) -> str:
        return source_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        parts = java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        # MM2's ReplicationPolicy.originalTopic, iterative instead of recursive.
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream

    # -- internal topics ------------------------------------------------------------------------------------
    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return self._internal_separator() + "internal"

    def _checkpoints_suffix(self) -> str:
        return self._internal_separator() + "checkpoints" + self._internal_suffix()

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._checkpoints_suffix()

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return "mm2-offset-syncs" + self._internal_separator() + cluster_alias + self._internal_suffix()

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())

    def is_internal_topic(self, topic: str) -> bool:
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal

    # -- cycles -------------------------------------------------------------------------------------------------
    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """MM2's MirrorSourceConnector.isCycle: did this topic (at any hop) come from `target_alias`?"""
        current: str | None = topic
        while current is not None:
            source = self.topic_source(current)
            if source is None:
                return False
            if source == target_alias:
                return True
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current:
                return False
            current = upstream
        return False

    def count_hops(self, topic: str, source_alias: str) -> int:
        """MM2's MirrorClient.countHopsForTopic: hops from `source_alias` to here, or -1."""
        hops = 0
        visited: set[str] = set()
        current: str | None = topic
        while current is not None:
            hops += 1
            source = self.topic_source(current)
            if source is None:
                return -1
            if source == source_alias:
                return hops
            if source in visited:
                return -1
            visited.add(source)
            current = self.upstream_topic(current)
        return -1

    # -- the same rules for the JVM -------------------------------------------------------------------------
    def _java_layers(self) -> str:
        """Zero or more leading `<component><separator>` layers, components split the way Java's split does."""
        sep = java_quote(self.separator)
        return f"(?:(?:(?!{sep}).)*{sep})*"

    def java_internal_regex(self) -> str:
        suffix = java_quote(self._internal_suffix())
        return rf"(?:__.*|\..*|.*-internal|.*\.internal|.*{suffix})"

    def java_heartbeats_regex(self) -> str:
        return self._java_layers() + java_quote(HEARTBEATS_TOPIC)

    def java_cycle_regex(self, target_alias: str) -> str | None:
        sep = java_quote(self.separator)
        # the remainder after `<target><sep>` must hold a non-empty component, or Java's split drops it
        return f"{self._java_layers()}{java_quote(target_alias)}{sep}(?!(?:{sep})*$).*"

    def spark_remote_topic_expr(self, source_alias: str, column: str = "topic") -> str:
        return f"concat({sql_string_literal(source_alias + self.separator)}, {column})"


def _looks_like_heartbeat(topic: str) -> bool:
    return topic.endswith(HEARTBEATS_TOPIC)


@dataclass(frozen=True)
class IdentityPolicy(PrefixPolicy):
    """MM2's IdentityReplicationPolicy: remote topics keep their names; heartbeats are still prefixed."""

    source_alias: str | None = None
    name: PolicyName = field(default="identity", init=False)

    @property
    def detects_cycles(self) -> bool:
        return False

    def remote_topic(self, source_alias: str, topic: str) -> str:
        if _looks_like_heartbeat(topic):
            return super().remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if _looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        if _looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic

    def java_cycle_regex(self, target_alias: str) -> str | None:
        # only heartbeats carry their source in their name
        prefixed = super().java_cycle_regex(target_alias)
        return f"(?=.*{java_quote(HEARTBEATS_TOPIC)}$){prefixed}"

    def spark_remote_topic_expr(self, source_alias: str, column: str = "topic") -> str:
        prefixed = super().spark_remote_topic_expr(source_alias, column)
        return f"CASE WHEN {column} LIKE '%{HEARTBEATS_TOPIC}' THEN {prefixed} ELSE {column} END"


_TEMPLATE_FIELD = re.compile(r"\{(source|topic)\}")
_TEMPLATE_LITERAL = re.compile(r"[A-Za-z0-9._-]*")


def template_problems(template: str) -> list[str]:
    """What is wrong with a naming template, as user-facing sentences (empty when it is fine)."""
    problems = []
    topics = template.count("{topic}")
    if topics != 1:
        problems.append(f"must contain {{topic}} exactly once (found {topics} times)")
    if template.count("{source}") > 1:
        problems.append("may contain {source} at most once")
    literal = _TEMPLATE_FIELD.sub("", template)
    if "{" in literal or "}" in literal:
        problems.append("only {source} and {topic} may appear in braces")
    elif not _TEMPLATE_LITERAL.fullmatch(literal):
        problems.append("its fixed text may only use the topic-name characters A-Z a-z 0-9 . _ -")
    return problems


@dataclass(frozen=True)
class TemplatePolicy(PrefixPolicy):
    """Remote topics rendered from a template with `{source}` and `{topic}`; heartbeats keep MM2's names.

    A template shaped exactly `{source}<sep>{topic}` behaves as `PrefixPolicy(<sep>)`, cycle detection included.
    Any other template cannot detect cycles from names alone (like identity), so the plan-time topology check
    applies to it.
    """

    template: str = "{source}.{topic}"
    name: PolicyName = field(default="template", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        problems = template_problems(self.template)
        if problems:
            raise ValueError(f"naming template {self.template!r} " + "; ".join(problems))

    def _as_prefix(self) -> PrefixPolicy | None:
        match = re.fullmatch(r"\{source\}([._-]+)\{topic\}", self.template)
        if match is None:
            return None
        return PrefixPolicy(match.group(1), self.internal_topic_separator_enabled)

    def _parse(self) -> re.Pattern[str]:
        pattern = ""
        last = 0
        for match in _TEMPLATE_FIELD.finditer(self.template):
            pattern += re.escape(self.template[last : match.start()])
            pattern += "(?P<source>.+?)" if match.group(1) == "source" else "(?P<topic>.+)"
            last = match.end()
        pattern += re.escape(self.template[last:])
        return re.compile(pattern)

    @property
    def detects_cycles(self) -> bool:
        return self._as_prefix() is not None

    def remote_topic(self, source_alias: str, topic: str) -> str:
        if _looks_like_heartbeat(topic):
            return super().remote_topic(source_alias, topic)
        return self.template.replace("{source}", source_alias).replace("{topic}", topic)

    def topic_source(self, topic: str) -> str | None:
        if _looks_like_heartbeat(topic):
            return super().topic_source(topic)
        match = self._parse().fullmatch(topic)
        if match is None or "{source}" not in self.template:
            return None
        return match.group("source")

    def upstream_topic(self, topic: str) -> str | None:
        if _looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        match = self._parse().fullmatch(topic)
        return None if match is None else match.group("topic")

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        prefix = self._as_prefix()
        if prefix is not None:
            return prefix.is_cycle(topic, target_alias)
        if _looks_like_heartbeat(topic):
            return super().is_cycle(topic, target_alias)
        return False

    def java_cycle_regex(self, target_alias: str) -> str | None:
        prefix = self._as_prefix()
        if prefix is not None:
            return prefix.java_cycle_regex(target_alias)
        prefixed = super().java_cycle_regex(target_alias)
        return f"(?=.*{java_quote(HEARTBEATS_TOPIC)}$){prefixed}"

    def spark_remote_topic_expr(self, source_alias: str, column: str = "topic") -> str:
        pieces: list[str] = []
        pending = ""
        last = 0
        for match in _TEMPLATE_FIELD.finditer(self.template):
            pending += self.template[last : match.start()]
            if match.group(1) == "source":
                pending += source_alias
            else:
                if pending:
                    pieces.append(sql_string_literal(pending))
                pieces.append(column)
                pending = ""
            last = match.end()
        pending += self.template[last:]
        if pending:
            pieces.append(sql_string_literal(pending))
        rendered = f"concat({', '.join(pieces)})" if len(pieces) > 1 else pieces[0]
        prefixed = super().spark_remote_topic_expr(source_alias, column)
        return f"CASE WHEN {column} LIKE '%{HEARTBEATS_TOPIC}' THEN {prefixed} ELSE {rendered} END"


def policy_for(
    policy: PolicyName,
    *,
    separator: str = DEFAULT_SEPARATOR,
    template: str | None = None,
) -> ReplicationPolicy:
    """The policy object for a flow's `naming:` block (`policy`, `separator`, `template`)."""
    if policy == "prefix":
        return PrefixPolicy(separator)
    if policy == "identity":
        return IdentityPolicy(separator)
    if policy == "template":
        if template is None:
            raise ValueError("naming policy 'template' needs a template, e.g. '{source}.{topic}'")
        return TemplatePolicy(separator, template=template)
    raise ValueError(f"unknown naming policy {policy!r} (use prefix, identity or template)")
