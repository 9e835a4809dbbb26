"""Refuse regexes that a backtracking engine could take forever on, before any name is matched against them.

Both engines that run kmirror's filters backtrack: Python's `re` (plan, the checkpointer) and java.util.regex
(Spark's `subscribePattern`, partition discovery). A topic or group name is chosen by whoever can create one on
the source, so a filter must not take exponential time on any name. Refused, by looking at the parsed pattern:
- nested quantifiers where the inner repeat can take over the next iteration's characters (`(a+)+`, `(.*)*`,
  `(a{1,5})+`, `(x.*)+`, `(a.*b)+`); `(-[a-z]+)*` and `(\\d+\\.)+` are fine;
- an unbounded repeat over alternatives that can start with the same character, or match nothing
  (`(a|a)*`, `(a|ab)+`, `(a|)*`) — read from the text, as Java sees it;
- three or more unbounded repeats that can all consume one character (`.*-.*-.*x`, `(?:.*-){3}x`: n^3 ways to
  split a name; group names have no length limit).
Possessive repeats and atomic groups are exempt: they never give characters back.

Pure. Must not: run a pattern on input to find out whether it is slow (a hung check is what this prevents).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from re import _constants as sre  # type: ignore[attr-defined]  # the parser's opcodes (CPython 3.11+)
from re import _parser  # type: ignore[attr-defined]  # CPython's regex parser: the tree, without compiling
from typing import Any

# Characters a hostile topic or group name is made of; enough to tell whether two pieces can consume the same one.
_ALPHABET = frozenset(string.printable) - frozenset("\n\r\x0b\x0c")
_UNBOUNDED_AT = 10  # a repeat of up to this many copies counts as unbounded: (a+){1,30} is as bad as (a+)+
_MAX_OVERLAPPING_UNBOUNDED = 2  # n^2 for a 32 KB group name is a fraction of a second; n^3 is hours


def catastrophic_backtracking(pattern: str) -> list[tuple[str, str]]:
    """(message, hint) for each reason `pattern` can take exponential (or worse than cubic) time to match a
    hostile name; empty if it cannot. A static check of the pattern's structure, a few microseconds."""
    try:
        tree = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return []
    problems: list[tuple[str, str]] = []
    nested = _nested_quantifier(list(tree))
    if nested:
        problems.append(
            (
                f"has nested quantifiers ({nested}): a name that almost matches makes it try exponentially many "
                "ways, which hangs plan and the replication job",
                "remove the inner or the outer quantifier, e.g. (a+)+ -> a+ and (.*)* -> .*",
            )
        )
    overlap = _overlapping_alternation(pattern)
    if overlap:
        problems.append(
            (
                f"repeats alternatives that can match the same text ({overlap}): a name that almost matches makes "
                "it try exponentially many ways",
                "make the alternatives start with different characters, or drop the repetition",
            )
        )
    unbounded = _unbounded_repeats(list(tree))
    for char in sorted(_ALPHABET):
        count = sum(1 for chars in unbounded if char in chars)
        if count > _MAX_OVERLAPPING_UNBOUNDED:
            problems.append(
                (
                    f"has {count} unbounded repeats that can all match {char!r}: a long name of them takes "
                    f"n^{count} steps to refuse",
                    "use at most two such repeats (e.g. one .* instead of several)",
                )
            )
            break
    return problems


def _repeat(op: Any, av: Any) -> tuple[int, int, list[Any]] | None:
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        lo, hi, sub = av
        return int(lo), int(hi), list(sub)
    return None


def _is_unbounded(lo: int, hi: int) -> bool:
    return hi == sre.MAXREPEAT or (hi >= _UNBOUNDED_AT and hi != lo)


def _children(op: Any, av: Any) -> list[list[Any]]:
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        return [list(av[2])]
    if op == sre.SUBPATTERN:
        return [list(av[3])]
    if op == sre.BRANCH:
        return [list(b) for b in av[1]]
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [list(av[1])]
    if op == sre.ATOMIC_GROUP:
        return [list(av)]
    return []


def _nested_quantifier(items: Sequence[Any]) -> str:
    """A variable repeat inside an unbounded one that can take over characters of the next iteration.

    `(a+)+` and `(x.*)+` can split "aaaa" or "xxxx" between iterations in exponentially many ways; `(-[a-z]+)*`
    and `(\\d+\\.)+` cannot (each iteration starts or ends with a character the inner repeat never takes).
    """
    for op, av in items:
        if op in (sre.POSSESSIVE_REPEAT, sre.ATOMIC_GROUP):
            continue  # gives nothing back: no backtracking into it
        rep = _repeat(op, av)
        if rep is not None and _is_unbounded(rep[0], rep[1]) and _can_consume(rep[2]):
            body = rep[2]
            first, last = _first(body)[0], _last(body)
            for inner in _inner_repeats(body):
                if inner & first and inner & last:
                    return "a variable repeat inside an unbounded one"
        for child in _children(op, av):
            found = _nested_quantifier(child)
            if found:
                return found
    return ""


def _inner_repeats(items: Sequence[Any]) -> list[frozenset[str]]:
    """The characters of every variable-length, backtracking repeat within `items`."""
    found: list[frozenset[str]] = []
    for op, av in items:
        if op in (sre.POSSESSIVE_REPEAT, sre.ATOMIC_GROUP, sre.ASSERT, sre.ASSERT_NOT):
            continue
        rep = _repeat(op, av)
        if rep is not None and rep[0] != rep[1]:
            found.append(_chars(rep[2]))
        for child in _children(op, av):
            found.extend(_inner_repeats(child))
    return found


_COMPOUND = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT, sre.SUBPATTERN, sre.ATOMIC_GROUP, sre.BRANCH)


def _last(items: Sequence[Any]) -> frozenset[str]:
    """The characters a match of `items` can end with (an over-approximation)."""
    found: set[str] = set()
    for op, av in reversed(items):
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            return frozenset(found | _single(op, av))
        children = _children(op, av) if op not in (sre.ASSERT, sre.ASSERT_NOT) else []
        for child in children:
            found |= _last(child)
        if op in _COMPOUND and not _first_of(op, av)[1]:
            return frozenset(found)
    return frozenset(found)


def _can_consume(items: Sequence[Any]) -> bool:
    return bool(_chars(items))


def _chars(items: Sequence[Any]) -> frozenset[str]:
    """Every alphabet character some piece of `items` can consume (an over-approximation)."""
    found: set[str] = set()
    for op, av in items:
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            continue
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            found |= _single(op, av)
            continue
        if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            return _ALPHABET
        for child in _children(op, av):
            found |= _chars(child)
    return frozenset(found)


def _single(op: Any, av: Any) -> frozenset[str]:
    if op == sre.LITERAL:
        return frozenset({chr(av)})
    if op == sre.NOT_LITERAL:
        return _ALPHABET - {chr(av)}
    if op == sre.ANY:
        return _ALPHABET
    chars: set[str] = set()
    negate = False
    for item_op, item_av in av:
        if item_op == sre.NEGATE:
            negate = True
        elif item_op == sre.LITERAL:
            chars.add(chr(item_av))
        elif item_op == sre.RANGE:
            chars |= {c for c in _ALPHABET if item_av[0] <= ord(c) <= item_av[1]}
        elif item_op == sre.CATEGORY:
            chars |= _category(item_av)
        else:
            chars |= _ALPHABET
    return frozenset(_ALPHABET - chars) if negate else frozenset(chars)


def _category(category: Any) -> set[str]:
    probe = {
        sre.CATEGORY_DIGIT: r"\d",
        sre.CATEGORY_NOT_DIGIT: r"\D",
        sre.CATEGORY_WORD: r"\w",
        sre.CATEGORY_NOT_WORD: r"\W",
        sre.CATEGORY_SPACE: r"\s",
        sre.CATEGORY_NOT_SPACE: r"\S",
    }.get(category)
    if probe is None:
        return set(_ALPHABET)
    compiled = re.compile(probe)
    return {c for c in _ALPHABET if compiled.fullmatch(c)}


def _first(items: Sequence[Any]) -> tuple[frozenset[str], bool]:
    """The characters a match of `items` can start with, and whether it can match the empty string."""
    found: set[str] = set()
    for op, av in items:
        first, nullable = _first_of(op, av)
        found |= first
        if not nullable:
            return frozenset(found), False
    return frozenset(found), True


def _first_of(op: Any, av: Any) -> tuple[frozenset[str], bool]:
    if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
        return _single(op, av), False
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        first, nullable = _first(list(av[2]))
        return first, nullable or av[0] == 0
    if op == sre.SUBPATTERN:
        return _first(list(av[3]))
    if op == sre.ATOMIC_GROUP:
        return _first(list(av))
    if op == sre.BRANCH:
        found: set[str] = set()
        any_nullable = False
        for branch in av[1]:
            first, nullable = _first(list(branch))
            found |= first
            any_nullable = any_nullable or nullable
        return frozenset(found), any_nullable
    if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
        return _ALPHABET, True
    return frozenset(), True  # anchors and lookarounds consume nothing


def _unbounded_repeats(items: Sequence[Any]) -> list[frozenset[str]]:
    """The characters of every unbounded, backtracking repeat, once per copy a bounded repeat makes of it."""
    found: list[frozenset[str]] = []
    for op, av in items:
        if op in (sre.POSSESSIVE_REPEAT, sre.ATOMIC_GROUP, sre.ASSERT, sre.ASSERT_NOT):
            continue
        rep = _repeat(op, av)
        if rep is not None and _is_unbounded(rep[0], rep[1]):
            found.append(_chars(rep[2]))  # what repeats inside it is the nested-quantifier check's business
        elif rep is not None:
            found.extend(_unbounded_repeats(rep[2]) * max(rep[1], 1))
        else:
            for child in _children(op, av):
                found.extend(_unbounded_repeats(child))
    return found


def _overlapping_alternation(pattern: str) -> str:
    """The first repeated group whose alternatives can start alike (or match nothing), as written; else ''.

    Read from the text, not the parsed tree: Python's parser folds `a|a` into a class `[aa]`, which its engine
    matches in linear time but Java's does not.
    """
    for body in _repeated_groups(pattern):
        alternatives = split_alternatives(body)
        if len(alternatives) < 2:
            continue
        firsts: list[frozenset[str]] = []
        for alternative in alternatives:
            try:
                first, nullable = _first(list(_parser.parse(alternative)))
            except (re.error, RecursionError, OverflowError, ValueError):
                return ""
            if nullable:
                return f"'({body})' has an alternative that matches nothing"
            if any(first & other for other in firsts):
                return f"'({body})'"
            firsts.append(first)
    return ""


def _repeated_groups(pattern: str) -> list[str]:
    """The bodies of the groups in `pattern` that an unbounded, non-possessive quantifier follows."""
    bodies: list[str] = []
    stack: list[int] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif char == "(":
            stack.append(i)
        elif char == ")" and stack:
            start = stack.pop()
            quantifier = re.match(r"(\*|\+|\{(\d+),(\d*)\})(\+?)", pattern[i + 1 :])
            if quantifier and not quantifier.group(4):
                upper = quantifier.group(3)
                lower = quantifier.group(2)
                if quantifier.group(2) is None or not upper or (int(upper) >= _UNBOUNDED_AT and upper != lower):
                    bodies.append(_group_body(pattern[start + 1 : i]))
        i += 1
    return bodies


def _group_body(inner: str) -> str:
    match = re.match(r"\?(?:[:>]|[a-zA-Z]*(?:-[a-zA-Z]+)?:)", inner)
    return inner[match.end() :] if match else inner


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
