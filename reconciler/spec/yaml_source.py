"""Parse YAML text into plain Python values plus the line and column of every key and value.

ruamel.yaml composes the node graph (each node keeps its start mark); we construct plain dicts, lists and
scalars from it ourselves, so that nothing is lost on the way: duplicate keys are reported (all of them, with
both locations) instead of silently overwritten, merge keys (`<<: *defaults`) work, custom tags are refused, and
`Locations` can answer "where is flows[1].topics.include[0]?" for any error found later.

Hostile input stays cheap: a document larger than `MAX_DOCUMENT_BYTES` is refused before it is parsed, one nested
deeper than `_MAX_DEPTH` levels as soon as the parser reaches that depth, and
aliases may not expand it to more than `MAX_EXPANDED_NODES` nodes or be used more than `MAX_ALIASES` times
(a "billion laughs" file of a few lines would otherwise build gigabytes).

YAML 1.2 rules apply (ruamel's default): `yes`/`no`/`on`/`off` are strings, not booleans.

No I/O: the loader reads the file and hands the text in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.spec.issues import FieldPath, SpecIssue

_T = "tag:yaml.org,2002:"
_PLAIN_TAGS = {_T + "str", _T + "int", _T + "float", _T + "bool", _T + "null"}
_TEXT_TAGS = {_T + "timestamp", _T + "binary"}
_MAX_DEPTH = 64
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""No desired state is this large: 10,000 topic names listed one by one take about 300 KB."""
MAX_ALIASES = 1000
MAX_EXPANDED_NODES = 1_000_000


class _TooLarge(Exception):
    def __init__(self, node: Node, message: str) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True)
class Mark:
    """A 1-based position in the file."""

    line: int
    column: int


@dataclass
class Locations:
    """Where every key and value of a parsed document is. Paths are tuples of keys and list indexes."""

    values: dict[FieldPath, Mark] = field(default_factory=dict)
    keys: dict[FieldPath, Mark] = field(default_factory=dict)

    def value(self, path: FieldPath) -> Mark:
        """The position of the value at `path`, or of its nearest ancestor that exists in the file."""
        for end in range(len(path), -1, -1):
            mark = self.values.get(path[:end])
            if mark is not None:
                return mark
        return Mark(1, 1)

    def key(self, path: FieldPath) -> Mark:
        """The position of the key that names `path` (its value's position for list items)."""
        mark = self.keys.get(path)
        return mark if mark is not None else self.value(path)

    def has(self, path: FieldPath) -> bool:
        return path in self.values


class YamlSyntaxError(Exception):
    """The text is not YAML kmirror can read; carries located issues."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        super().__init__("\n".join(str(i) for i in issues))
        self.issues = issues


def _mark(node: Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def parse_yaml(text: str, file: str) -> tuple[Any, Locations, list[SpecIssue]]:
    """Parse one YAML document. Returns (data, locations, issues); raises YamlSyntaxError if unreadable."""
    size = len(text.encode("utf-8", errors="surrogatepass")) if len(text) * 4 > MAX_DOCUMENT_BYTES else len(text)
    if size > MAX_DOCUMENT_BYTES:
        line = text.count("\n", 0, MAX_DOCUMENT_BYTES) + 1
        raise YamlSyntaxError(
            [
                SpecIssue(
                    file,
                    line,
                    1,
                    (),
                    f"the file is {size / 1024 / 1024:.1f} MiB; kmirror reads at most "
                    f"{MAX_DOCUMENT_BYTES // 1024 // 1024} MiB (the limit is passed on this line)",
                    "a desired state is a few kilobytes: list topics with regexes, not one by one",
                )
            ]
        )
    yaml = YAML(typ="rt")
    _limit_depth(yaml)
    try:
        _refuse_deep_flow(text)
        node = yaml.compose(text)
    except _TooDeep as exc:
        raise YamlSyntaxError(
            [
                SpecIssue(
                    file, exc.line, exc.column, (), f"nesting is deeper than {_MAX_DEPTH} levels",
                    "the desired state is never this deeply nested: look for unclosed [ or { here",
                )
            ]
        ) from None  # fmt: skip
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        hint = _syntax_hint(problem)
        raise YamlSyntaxError([SpecIssue(file, line, column, (), f"YAML syntax error: {problem}", hint)]) from None
    except (YAMLError, ValueError, TypeError, RecursionError, AttributeError, IndexError, KeyError) as exc:
        raise YamlSyntaxError(
            [SpecIssue(file, 1, 1, (), f"YAML syntax error: {exc}", "check the file is valid YAML")]
        ) from None
    if node is None:
        raise YamlSyntaxError(
            [SpecIssue(file, 1, 1, (), "the file is empty", "start from one of the files in examples/")]
        )
    builder = _Builder(yaml, file)
    try:
        data = builder.build(node, (), 0)
    except _TooLarge as exc:
        mark = _mark(exc.node)
        raise YamlSyntaxError(
            [SpecIssue(file, mark.line, mark.column, (), str(exc), "use fewer aliases (*name), or write it out")]
        ) from None
    return data, builder.locations, builder.issues


class _TooDeep(Exception):
    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"deeper than {_MAX_DEPTH} levels at {line}:{column}")
        self.line, self.column = line, column


_FLOW_TOKEN = re.compile(r"""[\[\]{}]|'(?:[^'\n]|'')*'|"(?:[^"\\\n]|\\.)*"|(?:^|(?<=\s))#[^\n]*""", re.MULTILINE)


def _refuse_deep_flow(text: str) -> None:
    """Flow brackets (`[[[[...`) nested deeper than `_MAX_DEPTH`, found by a scan that skips quoted strings and
    comments, before ruamel's scanner (which looks far ahead at each `[`) spends seconds on them."""
    depth = 0
    for match in _FLOW_TOKEN.finditer(text):
        token = match.group(0)
        if token in ("[", "{"):
            depth += 1
            if depth > _MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise _TooDeep(line, match.start() - text.rfind("\n", 0, match.start()))
        elif token in ("]", "}"):
            depth = max(0, depth - 1)


def _limit_depth(yaml: YAML) -> None:
    """Make the composer refuse a node nested deeper than `_MAX_DEPTH`, at the node, before it recurses on: a
    file of a thousand `[` would otherwise take seconds and end in Python's recursion limit."""
    composer = yaml.composer
    compose_node = composer.compose_node
    depth = 0

    def limited(parent: Any, index: Any) -> Any:
        nonlocal depth
        depth += 1
        try:
            if depth > _MAX_DEPTH + 1:
                mark = composer.parser.peek_event().start_mark
                raise _TooDeep(mark.line + 1, mark.column + 1)
            return compose_node(parent, index)
        finally:
            depth -= 1

    composer.compose_node = limited


def _syntax_hint(problem: str) -> str:
    if "tab" in problem:
        return "indent with spaces, not tabs"
    if "mapping values are not allowed" in problem:
        return "a value containing ': ' must be quoted, or the indentation is off"
    if "expected a single document" in problem:
        return "keep one document per file: remove the extra '---'"
    if "found character '%' " in problem or "found character '@'" in problem or "found character '`'" in problem:
        return "quote the value"
    return "fix the YAML at that position"


class _Builder:
    def __init__(self, yaml: YAML, file: str) -> None:
        self._yaml = yaml
        self._file = file
        self.locations = Locations()
        self.issues: list[SpecIssue] = []
        self._active: set[int] = set()
        self._built: set[int] = set()
        self._aliases = 0
        self._nodes = 0

    def _issue(self, node: Node, path: FieldPath, message: str, hint: str) -> None:
        mark = _mark(node)
        self.issues.append(SpecIssue(self._file, mark.line, mark.column, path, message, hint))

    def build(self, node: Node, path: FieldPath, depth: int) -> Any:
        self._count(node)
        self.locations.values.setdefault(path, _mark(node))
        if depth > _MAX_DEPTH:
            self._issue(node, path, "nesting is too deep", "the desired state is never this deeply nested")
            return None
        if id(node) in self._active:
            self._issue(node, path, "an alias refers to itself", "remove the recursive '*alias'")
            return None
        tag = str(node.tag) if node.tag is not None else ""
        if isinstance(node, ScalarNode):
            return self._scalar(node, path, tag)
        self._active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                if tag != _T + "seq":
                    self._unsupported_tag(node, path, tag)
                return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
            if isinstance(node, MappingNode):
                if tag != _T + "map":
                    self._unsupported_tag(node, path, tag)
                return self._mapping(node, path, depth)
        finally:
            self._active.discard(id(node))
        self._issue(node, path, "unsupported YAML node", "use plain mappings, lists and scalars")
        return None

    def _count(self, node: Node) -> None:
        # A node built twice was reached through an alias (ruamel composes `*a` as the anchored node itself).
        self._nodes += 1
        if self._nodes > MAX_EXPANDED_NODES:
            raise _TooLarge(node, f"aliases expand the document beyond {MAX_EXPANDED_NODES:,} values (an alias bomb)")
        if isinstance(node, ScalarNode):
            return
        if id(node) in self._built:
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _TooLarge(node, f"more than {MAX_ALIASES} alias uses (*name) in one document")
        else:
            self._built.add(id(node))

    def _unsupported_tag(self, node: Node, path: FieldPath, tag: str) -> None:
        self._issue(node, path, f"unsupported YAML tag {tag}", "remove the tag; kmirror.yaml uses plain YAML")

    def _scalar(self, node: ScalarNode, path: FieldPath, tag: str) -> Any:
        if tag in _TEXT_TAGS:
            return str(node.value)
        if tag not in _PLAIN_TAGS:
            self._unsupported_tag(node, path, tag)
            return str(node.value)
        if tag == _T + "str":
            return str(node.value)
        try:
            value = self._yaml.constructor.construct_object(node, deep=True)
        except Exception:  # a scalar ruamel resolved but cannot construct, e.g. an out-of-range float
            return str(node.value)
        if tag == _T + "bool":
            return bool(value)
        if tag == _T + "int":
            return int(value)
        if tag == _T + "float":
            return float(value)
        return None

    def _mapping(self, node: MappingNode, path: FieldPath, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        seen: dict[str, Node] = {}
        merged: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if str(key_node.tag) == _T + "merge":
                merged.extend(self._merge_sources(value_node, path))
                continue
            if not isinstance(key_node, ScalarNode):
                self._issue(key_node, path, "a key must be a plain string", "write the key as text, e.g. name:")
                continue
            key = str(key_node.value)
            if key in seen:
                first = _mark(seen[key])
                self._issue(
                    key_node,
                    (*path, key),
                    f"duplicate key '{key}' (first defined at line {first.line})",
                    "remove one of them",
                )
                continue
            seen[key] = key_node
            self.locations.keys[(*path, key)] = _mark(key_node)
            result[key] = self.build(value_node, (*path, key), depth + 1)
        for key_node, value_node in merged:
            key = str(key_node.value)
            if key not in result:
                self.locations.keys[(*path, key)] = _mark(key_node)
                result[key] = self.build(value_node, (*path, key), depth + 1)
        return result

    def _merge_sources(self, value: Node, path: FieldPath) -> list[tuple[Node, Node]]:
        sources = value.value if isinstance(value, SequenceNode) else [value]
        pairs: list[tuple[Node, Node]] = []
        for source in sources:
            if not isinstance(source, MappingNode):
                self._issue(source, path, "'<<' must merge a mapping", "merge an anchored mapping: <<: *defaults")
                continue
            pairs.extend((k, v) for k, v in source.value if isinstance(k, ScalarNode))
        return pairs
