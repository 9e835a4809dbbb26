"""Every example validates, carries the schema line, and the committed schema matches the models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from reconciler.cli.main import main
from reconciler.spec import load
from reconciler.spec.schema import schema_text
from reconciler.spec.secrets import outside_allowed_roots
from tests.examples import readme_env

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*/kmirror.yaml"))


def test_the_four_examples_exist() -> None:
    assert {p.parent.name for p in EXAMPLES} >= {"migration", "active-active", "aggregation", "disaster-recovery"}
    for path in EXAMPLES:
        assert (path.parent / "README.md").is_file()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_validates_without_warnings(path: Path) -> None:
    loaded = load(path)
    assert loaded.warnings == ()
    assert loaded.state.flows


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_reads_files_only_where_its_readme_allows(path: Path) -> None:
    """Every `ssl.*.location` and `${file:}` of an example lies below the folders kmirror may read with what its
    README exports (`KMIRROR_FILE_ROOTS`): plan and the job refuse any other (docs/security.md)."""
    environ = readme_env(path.parent.name)
    text = path.read_text()
    paths = re.findall(r"\$\{file:([^}]+)\}", text)
    clusters = YAML(typ="safe").load(text)["clusters"]
    paths += [v for c in clusters.values() for k, v in (c.get("client") or {}).items() if k.endswith(".location")]
    for written in paths:
        found = Path(written) if Path(written).is_absolute() else path.parent / written
        assert outside_allowed_roots(found, path.parent, environ) == "", f"{written}: README.md must allow it"


def test_aggregation_needs_its_readmes_file_roots() -> None:
    path = ROOT / "examples" / "aggregation" / "kmirror.yaml"
    assert readme_env("aggregation") == {"KMIRROR_FILE_ROOTS": "/etc/kafka"}
    assert "/etc/kafka/central-ca.pem" in path.read_text()
    assert "outside the folders" in outside_allowed_roots(Path("/etc/kafka/central-ca.pem"), path.parent, {})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_names_the_schema(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/kmirror.schema.json"
    assert (path.parent / "../../schemas/kmirror.schema.json").resolve().is_file()


def test_schema_file_is_fresh() -> None:
    assert (ROOT / "schemas/kmirror.schema.json").read_text() == schema_text(), (
        "run 'kmirror schema -o schemas/kmirror.schema.json' and commit"
    )


def test_schema_describes_the_file() -> None:
    schema = json.loads(schema_text())
    assert schema["required"] == ["version", "clusters", "state"]
    assert schema["additionalProperties"] is False
    flow = schema["$defs"]["FlowSpec"]
    assert {"source", "target", "topics", "naming", "sync", "offsets", "heartbeats"} <= set(flow["properties"])


def test_cli_validate_and_schema_check(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["validate", "-f", str(EXAMPLES[0])])
    assert ok.exit_code == 0 and "is valid" in ok.output
    bad = tmp_path / "kmirror.yaml"
    bad.write_text("version: 1\nclusters: {a: {bootstrap_servers: 'a:1'}}\nstate: {cluster: b}\n")
    result = runner.invoke(main, ["validate", "-f", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:3:18: state.cluster: unknown cluster 'b'" in result.output
    stale = tmp_path / "schema.json"
    stale.write_text("{}")
    assert runner.invoke(main, ["schema", "--check", "-o", str(stale)]).exit_code == 1
    assert runner.invoke(main, ["schema", "-o", str(stale)]).exit_code == 0
    assert runner.invoke(main, ["schema", "--check", "-o", str(stale)]).exit_code == 0
