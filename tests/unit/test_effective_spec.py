"""A job's effective spec, typed (`jobcontract.EffectiveSpec`), writes exactly the JSON it was built from: the plan
file, the state topic and the job's spec file keep their bytes, and the flow's digest still describes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.spec.digest import effective_digest
from reconciler.spec.loader import load, load_text

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(ROOT.glob("examples/*/kmirror.yaml"))

THROTTLED = """
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1", client: {sasl.password: "${env:PW}"}}
  dst:
    bootstrap_servers: "127.0.0.1:2"
    schema_registry: {url: "http://sr:8081"}
state: {cluster: dst}
flows:
  - {name: f, source: src, target: dst, topics: {include: ['orders']},
     replication: {throttle: 10MB, delivery: exactly_once}}
"""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_every_examples_flows_read_and_write_back_as_the_same_json(path: Path) -> None:
    desired = load(path, environ={}).state
    for flow in desired.flows:
        plain = desired.flow_effective_spec(flow.name)
        typed = EffectiveSpec.of(desired, flow.name)
        assert json.dumps(typed.model_dump(mode="json")) == json.dumps(plain)  # same keys, same order
        assert effective_digest(typed.model_dump(mode="json")) == desired.flow_digest(flow.name)


def test_a_throttled_flow_keeps_its_client_ids_and_rate_and_leaves_out_an_unsynced_registry(
    tmp_path: Path,
) -> None:
    desired = load_text(THROTTLED).state
    typed = EffectiveSpec.of(desired, "f")
    dumped = typed.model_dump(mode="json")
    assert dumped == desired.flow_effective_spec("f")
    assert "throttle" not in dumped["flow"]["replication"] and "schema_registry" not in dumped["clusters"]["dst"]
    assert typed.client_ids is not None and set(typed.client_ids) == {"source", "target"}
    assert typed.throttle == 10_000_000 and dumped["throttle"] == 10_000_000  # the job sizes its fetches by it
    assert effective_digest(dumped) == desired.flow_digest("f")  # outside the digest
    assert typed.flow.replication.delivery == "exactly_once"
    JobSpec("f", typed, desired.flow_digest("f"), tmp_path).write(tmp_path / "spec.json")
    again = JobSpec.read(tmp_path / "spec.json")
    assert again.effective == typed and json.loads((tmp_path / "spec.json").read_text())["spec"] == dumped
