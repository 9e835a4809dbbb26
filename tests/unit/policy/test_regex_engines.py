"""No filter can hang on any name, in either engine that runs it.

Python matches names with RE2 (linear in the name); the replication job hands the topic filter to Spark's
`subscribePattern`, matched by java.util.regex, which backtracks. So: every hostile form is refused at its line;
the forms RE2 cannot read are refused at their line with what to write instead; RE2 matches even a refused form
against a 10,000-character hostile name in milliseconds; and every pattern the guard accepts (a fixed corpus,
random patterns from a small grammar, and the job's whole subscribe pattern built from them) is matched by
java.util.regex in under 0.1 s against hostile topic names of Kafka's maximum length (249 characters).
"""

from __future__ import annotations

import itertools
import random
import re
import shutil
import subprocess
import time  # process_time: the CPU this check costs, not how long a loaded machine let it wait
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.policy import backtracking
from reconciler.core.policy.backtracking import (
    MAX_PATTERN_CHARS,
    STEP_BUDGET,
    TOPIC_ALPHABET,
    TOPIC_NAME_MAX,
    catastrophic_backtracking,
    position_automaton,
    worst_case_steps,
)
from reconciler.core.policy.filters import PatternFilter, compile_linear, java_subscribe_pattern
from reconciler.core.policy.naming import policy_for
from reconciler.spec import SpecError, load_text
from reconciler.spec.regex import regex_problems

pytestmark = pytest.mark.unit

HEAD = """version: 1
clusters:
  a: {bootstrap_servers: "a:9092"}
  b: {bootstrap_servers: "b:9092"}
state: {cluster: b}
flows:
  - name: a-to-b
    source: a
    target: b
"""

HOSTILE_FORMS = [
    # the issue's two
    "(.?){30}.{30}X",
    "(x|x?){20}y",
    # bounded repeats of a part that can match nothing
    "(a?){25}a{25}",
    "(?:a|){20}b",
    "(?:a*){2,9}b",
    "(a*)?(a*)?(a*)?(a*)?(a*)?(a*)?(a*)?(a*)?(a*)?(a*)?x",
    # bounded repeats of parts that can split a name many ways
    "(a+){1,30}",
    "(a{1,5}){2,40}x",
    "(?:[a-z]{1,3}){2,80}!",
    "a?" * 30 + "a" * 30,
    ".{0,30}" * 12 + "X",
    "(?:.*-){3}x",
    # alternation forms: nested, repeated, or written out
    "(?:a|a)*b",
    "(?:a|b|a)+c",
    "(?:a|[a-c])*d",
    "(?i:a|A)+b",
    "(?:a|a)" * 30 + "b",
    "(?:a*|b*)" * 20 + "x",
    "(?:ab|a)(?:bc|c)" * 20 + "x",
    "(?:(?:a|b)+)+c",
    ".*.*.*x",
]


@pytest.mark.parametrize("pattern", HOSTILE_FORMS)
def test_each_hostile_form_is_refused_at_its_line(pattern: str) -> None:
    text = HEAD + f"    topics: {{include: ['orders', '{pattern}']}}\n"
    started = time.process_time()
    with pytest.raises(SpecError) as caught:
        load_text(text, file="kmirror.yaml")
    assert time.process_time() - started < 1.0
    errors = [str(issue) for issue in caught.value.errors]
    assert any(e.startswith("kmirror.yaml:10:") and "flows[0].topics.include[1]" in e for e in errors), errors
    assert any("exponentially" in e or "n^" in e for e in errors), errors


@pytest.mark.parametrize("pattern", HOSTILE_FORMS)
def test_the_filter_refuses_a_hostile_form_that_skipped_the_loader(pattern: str) -> None:
    with pytest.raises(ValueError, match=r"steps|exponentially"):
        PatternFilter((pattern,)).matches("orders-events-eu-west-1-prod-v2")


@pytest.mark.parametrize("pattern", HOSTILE_FORMS)
def test_re2_matches_even_a_hostile_form_in_linear_time(pattern: str) -> None:
    # What Python runs names through: no backtracking at all, so a refused pattern would not hang either.
    matcher = compile_linear(pattern)
    for unit in ("orders-events-eu-west-1-prod-v2", "a", "ab", "x", "-", "a-"):
        name = (unit * (10_000 // len(unit) + 1))[:10_000] + "!"
        started = time.process_time()
        matcher.fullmatch(name)
        assert time.process_time() - started < 0.1, (pattern, unit)


@pytest.mark.parametrize(
    ("pattern", "needle", "hint"),
    [
        ("(?!test-).*", "lookarounds", "exclude"),
        ("orders(?=-v2)", "lookarounds", "exclude"),
        ("(?:a++)+", "possessive", "drop the second +"),
        ("(?>a+)+", "atomic", "(?:...)"),
        ("orders\\Z", "\\Z", "drop it"),
        ("a{2000}", "counts above 1000", "smaller count"),
    ],
)
def test_constructs_re2_lacks_are_refused_at_their_line_with_what_to_write(
    pattern: str, needle: str, hint: str
) -> None:
    text = HEAD + f"    groups: {{include: ['{pattern}']}}\n"
    with pytest.raises(SpecError) as caught:
        load_text(text, file="kmirror.yaml")
    errors = [str(issue) for issue in caught.value.errors]
    assert any(e.startswith("kmirror.yaml:10:") and needle in e and hint in e for e in errors), errors


ORDINARY = [
    "orders",
    "orders\\..*",
    "(?:orders|payments)\\..*",
    "(orders|orders-eu)\\..*",
    "[a-z]+(?:-[a-z]+)*",
    "[a-z0-9]+(?:[._-][a-z0-9]+)*",
    "(?:\\d+\\.)+v",
    "(?:[a-z]+\\.)*[a-z]+",
    "(?:ab)+",
    "(a|ab)+",
    "(?:foo|bar)*",
    ".*",
    ".*-.*",
    ".*\\..*",
    "mm2.*\\.internal",
    "orders-events-.*-v\\d+",
    "events-\\d{4}\\d{2}\\d{2}",
    "[a-z]{1,249}",
    "(?i:orders)\\..*",
    ".?.?.?x",
    "(?:eu|us)-(?:dev|prod)-.*",
]


@pytest.mark.parametrize("pattern", ORDINARY)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    assert regex_problems(pattern) == []


def test_re2_keeps_mm2s_full_match_semantics() -> None:
    topics = PatternFilter(("orders\\..*", "(?:eu|us)-payments"), ("orders\\.internal",))
    assert topics.matches("orders.created")
    assert topics.matches("eu-payments")
    assert not topics.matches("orders.internal")
    assert not topics.matches("xorders.created")  # full match, not a search
    assert not topics.matches("eu-payments-v2")
    assert not PatternFilter(()).matches("orders")  # an empty include list matches nothing
    assert not PatternFilter(("\\d+",)).matches("\u0661\u0662")  # \d is ASCII digits, as in Java


# -- random patterns from a small grammar ---------------------------------------------------------------------

_ATOMS = ["a", "b", "-", "\\.", ".", "[a-z]", "\\d", "[ab]", "x", "[^-]"]
_QUANTIFIERS = ["*", "+", "?", "{2}", "{0,3}", "{1,5}", "{2,}", "*?", "{3,9}"]


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth >= 3 or roll < 0.3:
        return rng.choice(_ATOMS)
    if roll < 0.6:
        return "".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(2, 4)))
    if roll < 0.8:
        body = "|".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(2, 3)))
        return f"(?:{body})"
    return f"(?:{_random_pattern(rng, depth + 1)}){rng.choice(_QUANTIFIERS)}"


def _corpus(count: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    accepted: list[str] = []
    refused: list[str] = []
    while len(accepted) < count:
        pattern = _random_pattern(rng)
        (refused if regex_problems(pattern) else accepted).append(pattern)
    return accepted, refused


def _hostile_names(pattern: str, rng: random.Random) -> list[str]:
    """Topic names of Kafka's maximum length that almost match: runs of the pattern's own characters."""
    used = [c for c in TOPIC_ALPHABET if c in pattern] + ["a", "b", "x", "0", "-", "."]
    units = sorted(set(used)) + ["".join(rng.choice(used) for _ in range(rng.randint(2, 4))) for _ in range(6)]
    names = []
    for unit in units:
        for end in ("Z", "9", "_"):
            names.append((unit * TOPIC_NAME_MAX)[: TOPIC_NAME_MAX - 1] + end)
    return names


@given(st.integers(min_value=0, max_value=2**32))
@settings(max_examples=60, deadline=None)
def test_the_bound_is_cheap_to_compute_and_refuses_or_accepts_every_random_pattern(seed: int) -> None:
    pattern = _random_pattern(random.Random(seed))
    started = time.process_time()
    catastrophic_backtracking(pattern)
    assert time.process_time() - started < 1.0, pattern


@given(st.integers(min_value=0, max_value=2**32))
@settings(max_examples=50, deadline=None)
def test_the_bound_is_never_below_the_exact_worst_case_of_short_names(seed: int) -> None:
    # The bound keeps a few worst cases per length and merges the rest; merging must only ever over-count.
    # Exact: every name of 5 characters (one per group of characters the pattern tells apart), every prefix.
    pattern = _random_pattern(random.Random(seed))
    try:
        automaton = position_automaton(re._parser.parse(pattern))  # type: ignore[attr-defined]
    except Exception:  # a repeat of a part that can match nothing: refused before any counting
        return
    length = 5
    bound, _, _ = worst_case_steps(automaton, horizon=length, budget=10**30)
    out = [1 + sum(targets.values()) for targets in automaton.follow]
    classes = backtracking._classes(automaton.masks)
    worst = 0
    for word in itertools.product(classes, repeat=length):
        vector, total = {0: 1}, out[0]
        for bit in word:
            nxt: dict[int, int] = {}
            for p, ways in vector.items():
                for q, more in automaton.follow[p].items():
                    if automaton.masks[q] & bit:
                        nxt[q] = nxt.get(q, 0) + ways * more
            vector = nxt
            total += sum(ways * out[p] for p, ways in vector.items())
        worst = max(worst, total)
    assert bound >= worst, (pattern, bound, worst)


JAVA_PROGRAM = """
import java.nio.file.*;
import java.util.*;
import java.util.regex.*;

public class RegexTimes {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]));
        for (int round = 0; round < 2; round++) {  // the first round warms the JIT up
            for (String line : lines) {
                String[] fields = line.split("\\t");
                Pattern pattern = Pattern.compile(fields[0]);
                long worst = 0;
                for (int i = 1; i < fields.length; i++) {
                    long best = Long.MAX_VALUE;
                    for (int attempt = 0; attempt < 3; attempt++) {
                        long started = System.nanoTime();
                        pattern.matcher(fields[i]).find();  // Spark's discovery: findFirstIn
                        pattern.matcher(fields[i]).matches();  // the consumer's subscribe(Pattern)
                        best = Math.min(best, System.nanoTime() - started);
                    }
                    worst = Math.max(worst, best);
                }
                if (round == 1) System.out.println(worst + "\\t" + fields[0]);
            }
        }
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java 11+ runs a single source file)")
def test_java_matches_every_accepted_pattern_in_under_a_tenth_of_a_second(tmp_path: Path) -> None:
    rng = random.Random(35)
    accepted, refused = _corpus(150, seed=35)
    assert len(refused) > 20  # the grammar does produce hostile forms, and the guard does refuse some
    patterns = ORDINARY + accepted
    policy = policy_for("prefix", separator=".", template=None)
    lines = []
    for pattern in patterns:
        names = _hostile_names(pattern, rng)
        lines.append("\t".join([f"^(?:{pattern})$", *names]))
        # what the job hands Spark: lookaheads for kmirror's, internal and cyclic topics, then the filter
        subscribe = java_subscribe_pattern(
            topics=PatternFilter((pattern,), (pattern,)), policy=policy, target_alias="b"
        )
        lines.append("\t".join([subscribe, *names]))
    (tmp_path / "cases.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "RegexTimes.java").write_text(JAVA_PROGRAM)
    result = subprocess.run(
        ["java", "-Xss512k", str(tmp_path / "RegexTimes.java"), str(tmp_path / "cases.tsv")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    times = [line.split("\t", 1) for line in result.stdout.splitlines()]
    assert len(times) == 2 * len(patterns)
    slow = [(int(nanos) / 1e9, pattern) for nanos, pattern in times if int(nanos) > 100_000_000]
    assert slow == [], slow


@pytest.mark.parametrize(
    "pattern",
    [
        "a" * (MAX_PATTERN_CHARS - 1),
        "(?:a|b|c|d)" * 900,
        "[a-z]{1,1000}",
        "(?:[a-m]x|[n-z]y){1,300}",
        "(?:\\d{1,3}\\.){1,100}",
        "[a-z]-" * 1600,
        "(?:[a-z]-)?" * 900,
        "(?:" + "|".join(f"t{i}-.*" for i in range(300)) + ")",
        "(?:[a-z]{1,20}[0-9]{1,20}){1,30}",
    ],
)
def test_checking_a_large_pattern_stays_well_under_a_second(pattern: str) -> None:
    started = time.process_time()
    regex_problems(pattern)
    assert time.process_time() - started < 1.0


def test_a_pattern_longer_than_the_check_reads_is_refused() -> None:
    (message, hint), *_ = catastrophic_backtracking("t0|" * (MAX_PATTERN_CHARS // 3 + 1) + "x")
    assert f"{MAX_PATTERN_CHARS:,}" in message and "include" in hint


def test_bounded_copies_of_an_unambiguous_group_are_accepted() -> None:
    # a counted loop whose iterations cannot overlap: one way to match, whatever the count
    assert catastrophic_backtracking("(?:\\d{1,3}\\.){1,100}v") == []
    assert catastrophic_backtracking("(?:[a-m]x|[n-z]y){1,300}") == []


def test_the_budget_is_what_the_messages_say() -> None:
    (message, _hint), *_ = catastrophic_backtracking("(.?){30}.{30}X") or [("", "")]
    assert "match nothing" in message
    (message, _hint), *_ = catastrophic_backtracking(".*-.*-.*x")
    assert f"{STEP_BUDGET:,}" in message and "n^3" in message
