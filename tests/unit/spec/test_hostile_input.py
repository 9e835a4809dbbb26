"""Hostile input stays cheap: an alias bomb, a huge file and catastrophic regexes are each refused in under a
second, with a located error and exit code 1; harmless look-alikes still load, and no filter can hang matching."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.core.policy.backtracking import catastrophic_backtracking
from reconciler.core.policy.filters import PatternFilter
from reconciler.spec import SpecError, load_text

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

ALIAS_BOMB = HEAD + "".join(
    f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]\n" if i else 'x0: &x0 ["lol", "lol", "lol", "lol"]\n'
    for i in range(10)
)
"""Nine levels of nine aliases each: 4 * 9^9 (1.5 billion) strings once expanded, 12 lines of text."""


def _validate(path: Path) -> tuple[int, str, float]:
    started = time.monotonic()
    result = CliRunner().invoke(main, ["validate", "-f", str(path)])
    return result.exit_code, result.output, time.monotonic() - started


def test_an_alias_bomb_is_refused_in_under_a_second_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "kmirror.yaml"
    path.write_text(ALIAS_BOMB)
    code, output, seconds = _validate(path)
    assert code == 1
    assert seconds < 1.0, f"took {seconds:.2f} s"
    assert re.search(rf"{re.escape(str(path))}:1[0-9]:\d+: .*alias", output), output


def test_a_50_mb_file_is_refused_in_under_a_second_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "kmirror.yaml"
    path.write_text(HEAD + "# padding\n" * 5_300_000)
    assert path.stat().st_size > 50_000_000
    code, output, seconds = _validate(path)
    assert code == 1
    assert seconds < 1.0, f"took {seconds:.2f} s"
    assert re.search(rf"{re.escape(str(path))}:\d+:1: .*MiB; kmirror reads at most 4 MiB", output), output


def test_a_few_aliases_still_work() -> None:
    text = HEAD.replace("flows:", "defaults: &d {include: ['orders\\\\..*']}\nflows:") + "    topics: *d\n"
    text = text.replace("defaults: &d", "x-defaults: &d")
    with pytest.raises(SpecError) as caught:  # an unknown top-level key, but the alias itself is fine
        load_text(text)
    assert "alias" not in str(caught.value)
    assert "x-defaults" in str(caught.value)


CATASTROPHIC = [
    "(a+)+",
    "(a|a)*",
    "(.*)*",
    "(a|)*",
    "(a{1,5})+",
    "(x.*)+",
    "(a.*b)+",
    "(?:a*)*",
    "(\\w+\\.?)+",
    "(a+){1,30}",
    ".*.*.*.*x",
    ".*-.*-.*x",
    "(?:.*-){3}x",
    "(.?){30}.{30}X",
    "(x|x?){20}y",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_regex_is_refused_at_load_with_its_line(pattern: str) -> None:
    text = HEAD + f"    groups: {{include: ['{pattern}']}}\n"
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        load_text(text, file="kmirror.yaml")
    assert time.monotonic() - started < 1.0
    errors = [str(i) for i in caught.value.errors]
    assert any(e.startswith("kmirror.yaml:10:") and "flows[0].groups.include[0]" in e for e in errors), errors
    assert any("exponentially" in e or "n^" in e for e in errors), errors


@pytest.mark.parametrize(
    "pattern",
    [
        "orders\\..*",
        "(?:orders|payments)\\..*",
        "[a-z]+(?:-[a-z]+)*",
        "(?:\\d+\\.)+v",
        "(?:[a-z]+\\.)*[a-z]+",
        "(?:ab)+",
        "(?:foo|bar)*",
        "(a|ab)+",
        ".*-.*",
        "mm2.*\\.internal",
    ],
)
def test_ordinary_patterns_are_not_refused(pattern: str) -> None:
    assert catastrophic_backtracking(pattern) == []


@pytest.mark.parametrize(("pattern", "unit"), [("[a-z]+(?:-[a-z]+)*", "a-"), ("(?:\\d+\\.)+v", "1."), (".*-.*x", "-")])
def test_accepted_patterns_refuse_a_hostile_name_quickly(pattern: str, unit: str) -> None:
    # A name that almost matches: the characters the pattern repeats, 2,000 of them (eight times the longest topic
    # name; group ids this long are not seen in practice), then one it cannot take. An accepted pattern may be
    # polynomial (`.*-.*x` is quadratic), never exponential: this stays in milliseconds even on a loaded machine.
    hostile = unit * (2000 // len(unit)) + "!"
    started = time.monotonic()
    assert not PatternFilter((pattern,)).matches(hostile)
    assert time.monotonic() - started < 1.0


def test_the_filter_itself_refuses_a_catastrophic_pattern_that_skipped_the_loader() -> None:
    with pytest.raises(ValueError, match="nested quantifiers"):
        PatternFilter(("(a+)+",)).matches("a" * 40 + "!")
