"""Refuse filter regexes that a backtracking engine could take too long on, before any name is matched against them.

kmirror matches filters in two engines. In Python (plan, the checkpointer) it uses RE2, which runs in time linear
in the name whatever the pattern (`policy.filters`). The replication job hands the topic filter to Spark's
`subscribePattern`, which matches with java.util.regex: a backtracking engine, which kmirror cannot replace there.
Java only ever matches TOPIC names there, and Kafka limits those to 249 characters of `[a-zA-Z0-9._-]`; a topic is
chosen by whoever can create one on the source, so the question this module answers is: what is the most work
java.util.regex can do on any such name? A pattern is refused when that bound is over `STEP_BUDGET`.

How the bound is computed (sound: it never under-counts what a backtracking engine explores):
- The pattern becomes a position automaton that keeps multiplicities: one state per character-consuming piece,
  an edge p -> q counted once per way the regex can go from p to q (so `(a|a)` has two edges, not one). A
  bounded repeat is written out copy by copy, `E{2,4}` as `E E (E (E)?)?`, the way a counted loop runs; one too
  large to write out is counted as `E+`/`E*`, whose ways include its ways.
- A backtracking engine that fails tries every way to consume every prefix of the name. The number of ways to
  reach each state after a prefix is a vector; the most work over all names of length n is at most the sum, over
  prefixes, of the largest such vector's cost. The largest vectors are computed for every length up to 249 over
  the 65 topic characters: vectors another one dominates are dropped (exact), and when too many remain they are
  merged by their element-wise maximum (an over-approximation, so still sound).
- A repeat whose body can match the empty string (`(a?){30}`, `(x|x?){20}`, `(a*)*`) is refused outright:
  engines iterate it in ways the automaton cannot count, and it never means more than the same pattern without
  the outer quantifier.
Lookarounds, back-references, possessive repeats and atomic groups never reach this check: RE2 has none of them,
so `spec.regex` refuses them first (if one does arrive, possessive and atomic are counted as ordinary repeats).

Pure. Must not: run a pattern on input to find out whether it is slow (a hung check is what this prevents).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from re import _constants as sre  # type: ignore[attr-defined]  # the parser's opcodes (CPython 3.11+)
from re import _parser  # type: ignore[attr-defined]  # CPython's regex parser: the tree, without compiling
from typing import Any

TOPIC_NAME_MAX = 249
"""Kafka's longest topic name: the longest name java.util.regex ever matches a filter against."""

TOPIC_ALPHABET = string.ascii_letters + string.digits + "._-"
"""Every character Kafka allows in a topic name."""

STEP_BUDGET = 1_000_000
"""The most backtracking steps a filter may take on one topic name: a few milliseconds in java.util.regex."""

_MAX_POSITIONS = 1_500  # bounded repeats written out beyond this are counted as unbounded
MAX_PATTERN_CHARS = 10_000
"""Longer filters are refused unchecked: no topic filter needs one (list names in `include` instead)."""
_MAX_VECTORS = 48  # distinct worst cases per prefix length checked for dominance
_MAX_SUPPORTS = 400  # distinct sets of states kept per prefix length before merging them all


class _Refused(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass
class _Fragment:
    first: dict[int, int]  # position -> ways a match can start with it
    last: dict[int, int]  # position -> ways a match can end with it
    empty: int  # ways to match the empty string


@dataclass
class _Automaton:
    masks: list[int] = field(default_factory=lambda: [0])  # per position: the topic characters it takes (bits)
    follow: list[dict[int, int]] = field(default_factory=lambda: [{}])  # position 0 is the start
    reasons: set[str] = field(default_factory=set)

    def position(self, mask: int) -> _Fragment:
        self.masks.append(mask)
        self.follow.append({})
        index = len(self.masks) - 1
        return _Fragment({index: 1}, {index: 1}, 0)

    def connect(self, last: dict[int, int], first: dict[int, int]) -> None:
        for p, ways in last.items():
            targets = self.follow[p]
            for q, more in first.items():
                targets[q] = targets.get(q, 0) + ways * more


def catastrophic_backtracking(pattern: str) -> list[tuple[str, str]]:
    """(message, hint) if java.util.regex could take more than `STEP_BUDGET` steps to match `pattern` against a
    topic name; empty if it cannot. A static count over the pattern's structure (milliseconds, no matching)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return [
            (
                f"is {len(pattern):,} characters long, more than the {MAX_PATTERN_CHARS:,} kmirror checks",
                "list the names as separate entries of the include or exclude list instead of one long regex",
            )
        ]
    try:
        tree = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return []  # not a regex at all: spec.regex reports that
    duplicated = _overlapping_single_characters(pattern)
    if duplicated:
        return [
            (
                f"has alternatives that match the same character ({duplicated}): a backtracking engine tries "
                "exponentially many ways when the group repeats",
                "put the characters in one class instead, e.g. (a|[a-c]) -> [a-c]",
            )
        ]
    try:
        automaton = position_automaton(tree)
    except _Refused as refused:
        return [(refused.message, refused.hint)]
    except RecursionError:
        return [("is nested too deeply to check", "simplify the regex")]
    steps, length, degree = worst_case_steps(automaton)
    if steps <= STEP_BUDGET:
        return []
    why = ", ".join(sorted(automaton.reasons)) or "parts that can match the same text in more than one way"
    growth = "exponentially many ways" if degree is None else f"about n^{degree} steps for an n-character name"
    return [
        (
            f"can make a backtracking engine take {growth} ({why}): java.util.regex, which matches topic filters "
            f"in the replication job, would take more than {STEP_BUDGET:,} steps on a topic name of {length} "
            "characters, and a hostile topic name would stall the job",
            "write it so that a name can be matched in only one way: drop an inner or outer quantifier "
            "((a+)+ -> a+), make the alternatives of a repeated group start with different characters, "
            "and use at most two repeats that can take the same character (one .* instead of several)",
        )
    ]


def position_automaton(tree: Any) -> _Automaton:
    """The position automaton, with multiplicities, of a parsed pattern (`re._parser.parse`); position 0 is the
    start. Raises `_Refused` for a repeat of a part that can match nothing."""
    automaton = _Automaton()
    root = _build(automaton, list(tree), bool(tree.state.flags & re.IGNORECASE))
    automaton.connect({0: 1}, root.first)
    return automaton


def worst_case_steps(
    automaton: _Automaton, *, horizon: int = TOPIC_NAME_MAX, budget: int = STEP_BUDGET
) -> tuple[int, int, int | None]:
    """(steps, length, degree): an upper bound on the steps a failing backtracking match takes on the worst topic
    name of up to `horizon` characters (or the first length at which it passes `budget`), and the polynomial
    degree of its growth (None when it looks exponential)."""
    classes = _classes(automaton.masks)
    out = [1 + sum(targets.values()) for targets in automaton.follow]
    moves = [
        [[(q, ways) for q, ways in targets.items() if automaton.masks[q] & bit] for targets in automaton.follow]
        for bit in classes
    ]
    vectors: list[dict[int, int]] = [{0: 1}]
    total = 0
    costs: list[int] = []
    previous: frozenset[tuple[tuple[int, int], ...]] | None = None
    for length in range(horizon + 1):
        cost = max(sum(ways * out[p] for p, ways in vector.items()) for vector in vectors) if vectors else 0
        costs.append(cost)
        total += cost
        if total > budget:
            return total, length, _degree(costs)
        if not vectors:
            break
        signature = frozenset(tuple(sorted(v.items())) for v in vectors)
        if signature == previous:  # the same worst cases from here on: each later length costs the same
            total += cost * (horizon - length)
            if total > budget:
                return total, horizon, 1
            break
        previous = signature
        vectors = _step(vectors, moves)
    return total, horizon, None if total > budget else 0


def _degree(costs: list[int]) -> int | None:
    """The growth of the per-character cost: n^(d-1) per character makes n^d in all; None when exponential."""
    n = len(costs) - 1
    if n < 8 or costs[n // 2] == 0:
        return None
    ratio = costs[n] / costs[n // 2]
    if ratio > 2**6:
        return None
    return max(1, round(math.log2(max(ratio, 1.0)))) + 1


def _step(vectors: list[dict[int, int]], moves: list[list[list[tuple[int, int]]]]) -> list[dict[int, int]]:
    produced: list[dict[int, int]] = []
    for vector in vectors:
        for by_state in moves:
            nxt: dict[int, int] = {}
            for p, ways in vector.items():
                for q, more in by_state[p]:
                    nxt[q] = nxt.get(q, 0) + ways * more
            if nxt:
                produced.append(nxt)
    return _keep_worst(produced)


def _keep_worst(vectors: list[dict[int, int]]) -> list[dict[int, int]]:
    """The distinct vectors, without those another one dominates (exact); when too many remain, those with the
    same states merged by their element-wise maximum, and only then all of them (both over-count: still sound).
    Merging vectors of different states is the last resort: it lets paths of different names meet."""
    unique = list({tuple(sorted(v.items())): v for v in vectors}.values())
    if len(unique) <= _MAX_VECTORS:
        unique.sort(key=lambda v: -sum(v.values()))
        kept: list[dict[int, int]] = []
        for vector in unique:
            if not any(all(other.get(p, 0) >= ways for p, ways in vector.items()) for other in kept):
                kept.append(vector)
        return kept
    by_support: dict[frozenset[int], dict[int, int]] = {}
    for vector in unique:
        merged = by_support.setdefault(frozenset(vector), {})
        for p, ways in vector.items():
            merged[p] = max(merged.get(p, 0), ways)
    if len(by_support) <= _MAX_SUPPORTS:
        return list(by_support.values())
    everything: dict[int, int] = {}
    for vector in by_support.values():
        for p, ways in vector.items():
            everything[p] = max(everything.get(p, 0), ways)
    return [everything]


def _classes(masks: Sequence[int]) -> list[int]:
    """One bit per group of topic characters that every position either takes all of or none of."""
    distinct = sorted(set(masks))
    groups: dict[tuple[bool, ...], int] = {}
    for i in range(len(TOPIC_ALPHABET)):
        bit = 1 << i
        signature = tuple(bool(mask & bit) for mask in distinct)
        groups[signature] = groups.get(signature, 0) | bit
    return [bits for signature, bits in groups.items() if any(signature)]


# -- the position automaton ----------------------------------------------------------------------------------


def _build(automaton: _Automaton, items: Sequence[Any], ignorecase: bool) -> _Fragment:
    result = _Fragment({}, {}, 1)
    for op, av in items:
        result = _concat(automaton, result, _build_one(automaton, op, av, ignorecase))
    return result


def _concat(automaton: _Automaton, left: _Fragment, right: _Fragment) -> _Fragment:
    automaton.connect(left.last, right.first)
    first = dict(left.first)
    for q, ways in right.first.items():
        first[q] = first.get(q, 0) + left.empty * ways
    last = dict(right.last)
    for p, ways in left.last.items():
        last[p] = last.get(p, 0) + right.empty * ways
    return _Fragment(
        {q: w for q, w in first.items() if w}, {p: w for p, w in last.items() if w}, left.empty * right.empty
    )


def _build_one(automaton: _Automaton, op: Any, av: Any, ignorecase: bool) -> _Fragment:
    if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
        return automaton.position(_mask(op, av, ignorecase))
    if op == sre.SUBPATTERN:
        _group, add_flags, del_flags, body = av
        if add_flags & re.IGNORECASE:
            ignorecase = True
        if del_flags & re.IGNORECASE:
            ignorecase = False
        return _build(automaton, list(body), ignorecase)
    if op == sre.ATOMIC_GROUP:
        return _build(automaton, list(av), ignorecase)
    if op == sre.BRANCH:
        branches = [_build(automaton, list(branch), ignorecase) for branch in av[1]]
        if sum(1 for b in branches if b.empty) > 1 or _overlap(automaton, branches):
            automaton.reasons.add("alternatives that can match the same text")
        return _Fragment(
            _sum(b.first for b in branches), _sum(b.last for b in branches), sum(b.empty for b in branches)
        )
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        return _repeat(automaton, int(av[0]), int(av[1]), list(av[2]), ignorecase)
    if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
        raise _Refused("uses a back-reference", "back-references are not supported in filters")
    return _Fragment({}, {}, 1)  # anchors (^ $ \b \A) and lookarounds consume nothing: one way, no characters


def _repeat(automaton: _Automaton, lo: int, hi: int, body: list[Any], ignorecase: bool) -> _Fragment:
    unbounded = hi == sre.MAXREPEAT
    if hi == 0:
        return _Fragment({}, {}, 1)
    if hi == 1 and lo == 1:
        return _build(automaton, body, ignorecase)
    probe = _Automaton()
    shape = _build(probe, body, ignorecase)
    if shape.empty:
        raise _Refused(
            "repeats a part that can match nothing (like (a?){30} or (a*)*): a backtracking engine tries "
            "exponentially many ways to match it on a name that almost matches",
            "make the repeated part consume at least one character, e.g. (a?){30} -> a{0,30}, (a|a?){20} -> "
            "a{0,20}, (a*)* -> a*",
        )
    size = len(probe.masks) - 1
    if (unbounded or hi > 1) and _loops(probe):
        automaton.reasons.add("nested quantifiers")
    copies = lo + (0 if unbounded else hi - lo) + (1 if unbounded else 0)
    if size * copies > _MAX_POSITIONS - len(automaton.masks):
        lo, hi, unbounded = min(lo, 1), sre.MAXREPEAT, True  # counted as E+ or E*: every way of E{lo,hi} is one of its
    result = _Fragment({}, {}, 1)
    for _ in range(lo):
        result = _concat(automaton, result, _build(automaton, body, ignorecase))
    if unbounded:
        loop = _build(automaton, body, ignorecase)
        automaton.connect(loop.last, loop.first)
        return _concat(automaton, result, _Fragment(loop.first, loop.last, 1))
    optional: _Fragment | None = None  # E{0,k} as (E (E (E)?)?)?: iteration i+1 only after iteration i
    for _ in range(hi - lo):
        copy = _build(automaton, body, ignorecase)
        if optional is not None:
            copy = _concat(automaton, copy, optional)
        optional = _Fragment(copy.first, copy.last, copy.empty + 1)
    return result if optional is None else _concat(automaton, result, optional)


def _loops(probe: _Automaton) -> bool:
    """Whether a repeat's body holds a repeat of its own: an edge back to an earlier (or the same) position."""
    return any(q <= p for p, targets in enumerate(probe.follow) if p for q in targets)


def _overlap(automaton: _Automaton, branches: Sequence[_Fragment]) -> bool:
    seen = 0
    for branch in branches:
        mask = 0
        for q in branch.first:
            mask |= automaton.masks[q]
        if mask & seen:
            return True
        seen |= mask
    return False


def _sum(maps: Any) -> dict[int, int]:
    total: dict[int, int] = {}
    for mapping in maps:
        for key, ways in mapping.items():
            total[key] = total.get(key, 0) + ways
    return total


_MASKS: dict[tuple[Any, str, bool], int] = {}


def _mask(op: Any, av: Any, ignorecase: bool) -> int:
    key = (op, repr(av), ignorecase)
    if key not in _MASKS:
        if len(_MASKS) > 4096:
            _MASKS.clear()
        _MASKS[key] = _compute_mask(op, av, ignorecase)
    return _MASKS[key]


def _compute_mask(op: Any, av: Any, ignorecase: bool) -> int:
    mask = 0
    for i, char in enumerate(TOPIC_ALPHABET):
        variants = {char, char.lower(), char.upper()} if ignorecase else {char}
        if any(_takes(op, av, ord(v)) for v in variants):
            mask |= 1 << i
    return mask


def _takes(op: Any, av: Any, code: int) -> bool:
    if op == sre.LITERAL:
        return bool(code == av)
    if op == sre.NOT_LITERAL:
        return bool(code != av)
    if op == sre.ANY:
        return code != ord("\n")
    negate, found = False, False
    for item_op, item_av in av:
        if item_op == sre.NEGATE:
            negate = True
        elif item_op == sre.LITERAL:
            found = found or code == item_av
        elif item_op == sre.RANGE:
            found = found or item_av[0] <= code <= item_av[1]
        elif item_op == sre.CATEGORY:
            found = found or _in_category(item_av, chr(code))
        else:
            found = True  # anything else: assume it takes the character (over-counting is safe)
    return found != negate


_CATEGORIES = {
    sre.CATEGORY_DIGIT: (string.digits, False),
    sre.CATEGORY_NOT_DIGIT: (string.digits, True),
    sre.CATEGORY_WORD: (string.ascii_letters + string.digits + "_", False),
    sre.CATEGORY_NOT_WORD: (string.ascii_letters + string.digits + "_", True),
    sre.CATEGORY_SPACE: (" \t\n\r\x0b\x0c", False),
    sre.CATEGORY_NOT_SPACE: (" \t\n\r\x0b\x0c", True),
}


def _in_category(category: Any, char: str) -> bool:
    members, negated = _CATEGORIES.get(category, (TOPIC_ALPHABET, False))
    return (char in members) != negated


def _overlapping_single_characters(pattern: str) -> str:
    """An alternation of single characters two of which take the same one (`(a|b|a)`, `(?:x|[a-z])`), else ''.

    Python's parser turns such an alternation into one character class, which loses that java.util.regex tries
    both alternatives; so this one is read from the text. Case is ignored (`(?i:a|A)` takes 'a' twice)."""
    for body in _alternations(pattern):
        masks = []
        for alternative in split_alternatives(body):
            try:
                items = list(_parser.parse(alternative))
            except (re.error, RecursionError, OverflowError, ValueError):
                return ""
            if len(items) != 1 or items[0][0] not in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
                break
            masks.append(_mask(items[0][0], items[0][1], True))
        else:
            for i, mask in enumerate(masks):
                if any(mask & other for other in masks[:i]):
                    return body
    return ""


def _alternations(pattern: str) -> list[str]:
    """The whole pattern and the body of each of its groups (group prefixes such as `?:` or `?i:` removed)."""
    bodies = [pattern]
    stack: list[int] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith(("]", "^]"), i + 1):
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif char == "(":
            stack.append(i)
        elif char == ")" and stack:
            inner = pattern[stack.pop() + 1 : i]
            prefix = re.match(r"\?(?:[:>]|[a-zA-Z]*(?:-[a-zA-Z]+)?:|<?[=!])", inner)
            bodies.append(inner[prefix.end() :] if prefix else inner)
        i += 1
    return bodies


def split_alternatives(body: str) -> list[str]:
    """`body` split at its top-level `|` (not inside a group or a character class; escapes kept)."""
    parts: list[str] = []
    depth = 0
    in_class = False
    start = 0
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return parts
