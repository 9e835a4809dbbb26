"""The guides hold together: every relative link and #anchor in README.md, docs/ and the examples' READMEs
resolves, and every kmirror command they show exists."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from reconciler.cli.main import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*/README.md")])
GUIDES = [
    "concepts",
    "reference",
    "plan-format",
    "migration-guide",
    "disaster-recovery",
    "mm2-users",
    "troubleshooting",
    "metrics",
    "delivery",
]

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_BLOCK = re.compile(r"```.*?```", re.S)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped (but - and _), spaces to -."""
    text = _CODE_BLOCK.sub("", page.read_text())
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        out.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return out


def test_the_guides_exist_and_the_readme_links_them() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in GUIDES:
        assert (ROOT / "docs" / f"{name}.md").is_file(), name
        assert f"(docs/{name}.md)" in readme, f"README does not link docs/{name}.md"
    assert "(examples/gitops-repo/README.md)" in readme


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    text = _CODE_BLOCK.sub("", page.read_text())
    for link in _LINK.findall(text):
        if re.match(r"^[a-z]+:", link):
            continue  # http(s), mailto
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.name}: broken link {link}"
        if anchor and target.suffix == ".md":
            assert anchor in _anchors(target), f"{page.name}: no heading for #{anchor} in {target.name}"


def _command_paths() -> set[tuple[str, ...]]:
    paths: set[tuple[str, ...]] = set()

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        for name, cmd in group.commands.items():
            paths.add((*prefix, name))
            if isinstance(cmd, click.Group):
                walk(cmd, (*prefix, name))

    walk(main, ())
    return paths


_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"(?:^|[\s;&|(\"])kmirror (?:--?[a-z-]+ )*([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?")


_SHELL_BLOCK = re.compile(r"```(?:sh|bash|shell|console)\n.*?```", re.S)


def _code(text: str) -> list[str]:
    blocks = _SHELL_BLOCK.findall(text)
    lines = [line.split(" #")[0] for b in blocks for line in b.splitlines()[1:-1] if not line.lstrip().startswith("#")]
    spans = [c for c in _CODE_SPAN.findall(_CODE_BLOCK.sub("", text)) if c.startswith("kmirror ")]
    return lines + spans


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_kmirror_commands_in_the_guides_exist(page: Path) -> None:
    known = _command_paths()
    seen = 0
    for code in _code(page.read_text()):
        for first, second in _COMMAND.findall(code):
            seen += 1
            ok = (first,) in known
            if ok and second and any(p[:1] == (first,) and len(p) == 2 for p in known):
                ok = (first, second) in known  # a group: its subcommand must exist too
            assert ok, f"{page.name}: `kmirror {first} {second}` is not a command (in: {code.strip()})"
    if page.name in {f"{g}.md" for g in GUIDES if g != "reference"}:
        assert seen, f"{page.name} shows no kmirror command"
