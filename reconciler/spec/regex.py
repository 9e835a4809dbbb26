"""Check a filter regex for every engine that reads it: RE2 in Python (planner, offsets; `re` parses it here too)
and java.util.regex (Spark's `subscribePattern`, and MM2 if the user goes back). A pattern must mean the same
thing in all of them.

What is refused, and why (Python 3.11+ vs Java 17+):
- Python-only: named groups `(?P<n>..)`, `(?P=n)`, conditionals `(?(1)..)`, comments `(?#..)`, flags `a`/`L`,
  `{,n}` without a lower bound (Java rejects it).
- Java-only: `(?<n>..)` named groups, `\\k<n>`, `\\Q..\\E` quoting, `\\p{..}` classes, `\\z`, `\\h`, `\\R`, `\\X`,
  `\\G`, `\\e`, `\\x{..}`, flags `d`/`U`; inside a class `&&` (intersection) and nested `[..]` (union), which
  Python reads as literal characters.
- Different in each: `\\v` (Python: one vertical-tab char; Java: any vertical whitespace), `\\b` in a class.
- Not portable once kmirror joins a filter's patterns: global inline flags such as `(?i)` (only allowed at the
  very start in Python; use a scoped `(?i:..)`), and backreferences `\\1` (group numbers shift).
`\\A`, `^`, `$` are harmless: topic names never hold a newline.

Also refused, because kmirror matches names with RE2 in Python (linear time whatever the pattern, see
`policy.filters`) and RE2 lacks them: lookarounds `(?=..)` `(?!..)` `(?<=..)` `(?<!..)` (use the filter's
`exclude` list), possessive quantifiers `a*+`, atomic groups `(?>..)`, `\\Z`, `\\uHHHH`, the verbose flag `x`,
and counts above 1000.

And refused: patterns that java.util.regex, which matches the topic filter in the replication job and
backtracks, could take more than a few milliseconds on when given a hostile topic name (`policy.backtracking`
counts the ways; it is sound for bounded repeats too):
- a repeat of a part that can match nothing (`(.?){30}`, `(x|x?){20}`, `(a*)*`, `(a|)*`);
- nested quantifiers whose inner repeat can take the next iteration's characters (`(a+)+`, `(a{1,5})+`, `(x.*)+`);
- repeated alternatives that can match the same text (`(a|a)*`, `(a|b|a)+`);
- three or more repeats that can all take the same characters (`.*-.*-.*x`, `x?x?...x?xx...x`): n^3 or worse.

Pure: no I/O. Must not: compile or run a pattern on input to find out whether it is slow (static checks only).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from reconciler.core.policy.backtracking import catastrophic_backtracking, split_alternatives
from reconciler.core.policy.filters import linear_engine_error
from reconciler.spec.issues import Severity


@dataclass(frozen=True)
class RegexProblem:
    message: str
    hint: str
    severity: Severity = "error"


_JAVA_ONLY_ESCAPES = {
    "Q": ("\\Q...\\E quoting is Java-only", "escape each special character with a backslash instead"),
    "E": ("\\E (end of \\Q quoting) is Java-only", "escape each special character with a backslash instead"),
    "p": ("\\p{...} character classes are Java-only", "write an explicit class such as [A-Za-z]"),
    "P": ("\\P{...} character classes are Java-only", "write an explicit negated class such as [^A-Za-z]"),
    "z": ("\\z is Java-only", "drop it: a filter always has to match the whole topic name"),
    "h": ("\\h (horizontal whitespace) is Java-only", "topic names cannot contain whitespace; drop it"),
    "H": ("\\H is Java-only", "write an explicit class instead"),
    "R": ("\\R (line break) is Java-only", "topic names cannot contain line breaks; drop it"),
    "X": ("\\X (grapheme cluster) is Java-only", "use . instead"),
    "G": ("\\G is Java-only", "drop it"),
    "e": ("\\e (escape character) is Java-only", "topic names cannot contain it; drop it"),
    "k": ("\\k<name> back-references are Java-only", "back-references are not supported in filters"),
}
_GLOBAL_FLAGS = re.compile(r"\(\?([a-zA-Z]+)(?:-([a-zA-Z]+))?(\)|:)")
_PYTHON_ONLY_FLAGS = {"a": "ASCII", "L": "LOCALE"}
_JAVA_ONLY_FLAGS = {"d": "UNIX_LINES", "U": "UNICODE_CHARACTER_CLASS", "c": "CANON_EQ"}


def regex_problems(pattern: str) -> list[RegexProblem]:
    """Everything wrong with `pattern` as a kmirror filter regex; empty if it is portable and compiles."""
    problems = _portability_problems(pattern)
    if any(p.severity == "error" for p in problems):
        return problems  # the Python compile error would only repeat the same problem less clearly
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(_compile_problem(pattern, exc))
        except (RecursionError, OverflowError, ValueError) as exc:
            problems.append(RegexProblem(f"is not a valid regex: {exc}", "simplify the regex"))
    for warning in caught:
        if issubclass(warning.category, FutureWarning) and "nested set" in str(warning.message):
            problems.append(
                RegexProblem(
                    "a '[' inside a character class is a class union in Java but a literal '[' in Python",
                    "escape it as \\[ or move it out of the class",
                )
            )
    if not problems:
        problems.extend(linear_engine_problems(pattern))
    if not problems:
        problems.extend(backtracking_problems(pattern))
    if pattern != pattern.strip():
        problems.append(
            RegexProblem(
                "has leading or trailing whitespace, which no topic or group name contains",
                "remove the spaces",
            )
        )
    if pattern == "":
        problems.append(RegexProblem("is empty and matches nothing", "remove it, or write .* for everything"))
    return problems


def _compile_problem(pattern: str, exc: re.error) -> RegexProblem:
    where = f" at position {exc.pos}" if exc.pos is not None else ""
    hint = "fix the regular expression"
    if exc.msg.startswith("nothing to repeat") and ("*" in pattern and ".*" not in pattern):
        hint = "this looks like a glob; in a regex 'any characters' is .*, e.g. 'orders.*' not 'orders*'"
    elif exc.msg.startswith("nothing to repeat"):
        hint = "a quantifier (* + ? {n}) needs something before it; escape it as \\* if you mean the character"
    elif "missing )" in exc.msg or "unbalanced parenthesis" in exc.msg:
        hint = "balance the parentheses, or escape a literal one as \\( \\)"
    elif "unterminated character set" in exc.msg:
        hint = "close the [ with ], or escape a literal one as \\["
    return RegexProblem(f"does not compile: {exc.msg}{where}", hint)


def _portability_problems(pattern: str) -> list[RegexProblem]:
    problems: list[RegexProblem] = []
    i = 0
    in_class = False
    class_start = 0
    n = len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            problems.extend(_escape_problems(pattern, i, nxt, in_class))
            i += 2
            continue
        if in_class:
            if char == "]" and i > class_start:
                in_class = False
            elif pattern.startswith("&&", i):
                problems.append(
                    RegexProblem(
                        "'&&' inside [...] is a class intersection in Java but two literal '&' in Python",
                        "write the resulting class out explicitly",
                    )
                )
                i += 1
            i += 1
            continue
        if char == "[":
            in_class = True
            class_start = i + 1
            if pattern.startswith("^", class_start):
                class_start += 1
            if pattern.startswith("]", class_start):
                class_start += 1  # a ']' right after '[' or '[^' is a literal in both engines
            i += 1
            continue
        if char == "(" and pattern.startswith("(?", i):
            problems.extend(_group_problems(pattern, i))
        if char == "{" and re.match(r"\{,\d+\}", pattern[i:]):
            problems.append(
                RegexProblem("'{,n}' without a lower bound is Python-only (Java rejects it)", "write {0,n} instead")
            )
        i += 1
    return problems


def _escape_problems(pattern: str, i: int, nxt: str, in_class: bool) -> list[RegexProblem]:
    if nxt in _JAVA_ONLY_ESCAPES:
        message, hint = _JAVA_ONLY_ESCAPES[nxt]
        return [RegexProblem(message, hint)]
    if nxt == "x" and pattern.startswith("{", i + 2):
        return [RegexProblem("\\x{...} is Java-only", "write \\xHH or \\uHHHH instead")]
    if nxt == "v":
        return [
            RegexProblem(
                "\\v means a vertical tab in Python but any vertical whitespace in Java",
                "topic names cannot contain it; drop it",
            )
        ]
    if nxt == "b" and in_class:
        return [RegexProblem("\\b inside [...] is a backspace in Python and an error in Java", "drop it")]
    if nxt.isdigit() and nxt != "0" and not in_class:
        return [
            RegexProblem(
                f"back-reference \\{nxt} is not supported in filters",
                "kmirror combines a filter's patterns, which renumbers groups; write the text out instead",
            )
        ]
    return []


def _group_problems(pattern: str, i: int) -> list[RegexProblem]:
    rest = pattern[i:]
    if rest.startswith(("(?P<", "(?P=")):
        return [
            RegexProblem(
                "named groups (?P<name>...) are Python-only (Java writes (?<name>...))",
                "use a non-capturing group (?:...); names serve no purpose in a filter",
            )
        ]
    if rest.startswith("(?<") and not rest.startswith(("(?<=", "(?<!")):
        return [
            RegexProblem(
                "named groups (?<name>...) are Java-only (Python writes (?P<name>...))",
                "use a non-capturing group (?:...); names serve no purpose in a filter",
            )
        ]
    if rest.startswith("(?("):
        return [RegexProblem("conditional groups (?(...)...) are Python-only", "rewrite it without a condition")]
    if rest.startswith("(?#"):
        return [RegexProblem("comments (?#...) are Python-only", "remove the comment")]
    match = _GLOBAL_FLAGS.match(rest)
    if match is None:
        return []
    problems = []
    letters = (match.group(1) or "") + (match.group(2) or "")
    for letter in letters:
        if letter in _PYTHON_ONLY_FLAGS:
            problems.append(
                RegexProblem(f"inline flag '{letter}' ({_PYTHON_ONLY_FLAGS[letter]}) is Python-only", "remove the flag")
            )
        elif letter in _JAVA_ONLY_FLAGS:
            problems.append(
                RegexProblem(f"inline flag '{letter}' ({_JAVA_ONLY_FLAGS[letter]}) is Java-only", "remove the flag")
            )
    if match.group(3) == ")" and not problems:
        problems.append(
            RegexProblem(
                f"global inline flags {match.group(0)} are not portable: Python allows them only at the very "
                "start, and kmirror joins a filter's patterns into one",
                f"use a scoped group instead, e.g. (?{match.group(1)}:orders.*)",
            )
        )
    return problems


def literal_text(pattern: str) -> str | None:
    """The one name `pattern` matches if it is a plain name (escaped punctuation allowed), else None.

    `orders`, `orders\\.created` -> themselves unescaped; `orders.created` (unescaped dot) -> None.
    """
    text = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            text.append(pattern[i + 1])
            i += 2
            continue
        if char.isalnum() or char in "_-":
            text.append(char)
            i += 1
            continue
        return None
    return "".join(text)


def literal_prefix(pattern: str) -> str:
    """A prefix every name matched by `pattern` starts with ('' when none can be told cheaply)."""
    if _has_top_level_alternation(pattern):
        return ""
    start = 1 if pattern.startswith("^") else 0
    text: list[str] = []
    i = start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            piece, step = pattern[i + 1], 2
        elif char.isalnum() or char in "_-":
            piece, step = char, 1
        else:
            break
        following = pattern[i + step : i + step + 1]
        if following and following in "*?{":
            break  # the piece is optional
        text.append(piece)
        i += step
    return "".join(text)


def _has_top_level_alternation(pattern: str) -> bool:
    return len(split_alternatives(pattern)) > 1


_LINEAR_ENGINE_HINTS = (
    (
        ("(?=", "(?!", "(?<=", "(?<!"),
        "lookarounds are not supported",
        "list the names to leave out in the filter's exclude instead of a negative lookahead",
    ),
    (("(?>",), "atomic groups (?>...) are not supported", "use an ordinary group (?:...)"),
    (("*+", "++", "?+", "}+"), "possessive quantifiers are not supported", "drop the second +, e.g. a*+ -> a*"),
    (("\\Z",), "\\Z is not supported", "drop it: a filter always has to match the whole name"),
    (("\\u",), "\\uHHHH escapes are not supported", "write the character itself, or \\xHH"),
    (("(?x",), "the verbose flag x is not supported", "remove the flag and the spaces"),
    (("repetition size",), "counts above 1000 are not supported", "use a smaller count, or * or +"),
)


def linear_engine_problems(pattern: str) -> list[RegexProblem]:
    """Why RE2, the linear-time engine kmirror matches names with, cannot read `pattern` (empty when it can)."""
    error = linear_engine_error(pattern)
    if error is None:
        return []
    for needles, what, hint in _LINEAR_ENGINE_HINTS:
        if any(needle in error for needle in needles):
            return [
                RegexProblem(
                    f"uses a construct RE2 lacks: {what} (kmirror matches names with RE2, whose time is linear in "
                    f"the name whatever the pattern; RE2 says: {error})",
                    hint,
                )
            ]
    return [RegexProblem(f"is not supported by RE2, kmirror's linear-time matcher: {error}", "simplify the regex")]


def backtracking_problems(pattern: str) -> list[RegexProblem]:
    """Why java.util.regex could take too long on a hostile topic name with `pattern` (see policy.backtracking)."""
    return [RegexProblem(message, hint) for message, hint in catastrophic_backtracking(pattern)]
