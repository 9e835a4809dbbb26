"""The pull-request comment flags a change to where kmirror connects: bootstrap servers, client settings, the
state cluster; nothing else, and never a value."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.spec.connections import connection_changes, warning_markdown

pytestmark = pytest.mark.unit

BASE = """version: 1
clusters:
  onprem: {bootstrap_servers: "a:9093", client: {security.protocol: SSL, ssl.ca.location: ca.pem}}
  cloud: {bootstrap_servers: "b:9093", client: {sasl.password: "${env:PW}"}}
state: {cluster: cloud}
flows: []
"""


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (('"b:9093"', '"evil.example.com:9093"'), ["clusters.cloud.bootstrap_servers"]),
        (("ssl.ca.location: ca.pem", "ssl.ca.location: mine.pem"), ["clusters.onprem.client"]),
        (("state: {cluster: cloud}", "state: {cluster: onprem}"), ["state.cluster"]),
        (("flows: []", "flows: [{name: x, source: onprem, target: cloud}]"), []),
        (("  cloud:", "  other:"), ["clusters.cloud.bootstrap_servers", "clusters.cloud.client",
                                    "clusters.other.bootstrap_servers", "clusters.other.client"]),
    ],
)  # fmt: skip
def test_what_is_flagged(edit: tuple[str, str], expected: list[str]) -> None:
    assert connection_changes(BASE, BASE.replace(*edit)) == expected


def test_a_new_file_or_an_unreadable_one_is_not_flagged_as_a_change() -> None:
    assert connection_changes("", BASE) == []
    assert connection_changes("{{{", BASE) == []


def test_the_warning_names_fields_not_values(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "head.yaml").write_text(BASE.replace('"b:9093"', '"evil.example.com:9093"'))
    result = CliRunner().invoke(main, ["connections", str(tmp_path / "base.yaml"), str(tmp_path / "head.yaml")])
    assert result.exit_code == 0
    out = result.stdout
    assert out.startswith("> [!WARNING]") and "`clusters.cloud.bootstrap_servers`" in out and "evil" not in out
    assert warning_markdown([]) == ""
