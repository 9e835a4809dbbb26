"""A saved plan cannot be forged: the seal is an HMAC keyed with KMIRROR_PLAN_KEY, and apply compares every
saved change, `after` included, with the same change planned now, naming what differs.

The forger's moves tried here: change a job spec's `bootstrap_servers` (send the replicated data, and the
job's credentials, to another host) or a topic's `retention.ms` (delete the data), then re-seal the file with
the unkeyed SHA-256 anyone can compute, or with a wrong key, or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.app.operations import StalePlanError, check_saved_plan
from reconciler.plan.definition import Plan
from reconciler.render import render_json, render_markdown, render_text
from reconciler.resources.job_status import JobStatus
from reconciler.state.records import StateSnapshot
from tests.unit.plan.builders import desired, live, owned, plan, topic

pytestmark = pytest.mark.unit

KEY = b"a-ci-secret-of-32-random-characters"
WRONG_KEY = b"another-key-that-is-long-enough!!"
JOB = "job/f"
TOPIC = "topic/dst/src.orders"


def _fresh() -> Plan:
    ds = desired("topics: {include: ['orders']}")
    return plan(ds, live(src=[topic("orders", partitions=2, retention_ms="86400000")]), owned(), JobStatus({}))


def _saved(key: bytes | None) -> Plan:
    """What `kmirror plan --out` writes and `kmirror apply PLANFILE` reads back."""
    return Plan.from_json(_fresh().sealed(key).to_json())


def _snapshot(saved: Plan) -> StateSnapshot:
    return StateSnapshot(lineage=saved.state.lineage, serial=saved.state.serial)


def _change(doc: dict[str, Any], address: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in doc["changes"] if c["address"] == address)
    return found


def _evil_servers(doc: dict[str, Any]) -> None:
    _change(doc, JOB)["after"]["spec"]["clusters"]["dst"]["bootstrap_servers"] = "evil.example:9092"


def _retention_1ms(doc: dict[str, Any]) -> None:
    _change(doc, TOPIC)["after"]["configs"]["retention.ms"] = "1"


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    "bootstrap_servers": (
        _evil_servers,
        f'{JOB}: after.spec.clusters.dst.bootstrap_servers: the plan file has "evil.example:9092"',
        'a fresh plan has "127.0.0.1:2"',
    ),
    "retention.ms": (
        _retention_1ms,
        f'{TOPIC}: after.configs.retention.ms: the plan file has "1"',
        'a fresh plan has "86400000"',
    ),
}


def _forged(edit: Callable[[dict[str, Any]], None], reseal: str) -> Plan:
    doc = json.loads(_saved(KEY).to_json())
    edit(doc)
    edited = Plan.from_json(json.dumps(doc))
    if reseal == "unkeyed hash":
        return edited.sealed(None)
    if reseal == "wrong key":
        return edited.sealed(WRONG_KEY)
    return edited  # the old seal left in place


@pytest.mark.parametrize("reseal", ["unkeyed hash", "wrong key", "not re-sealed"])
@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("apply_key", [KEY, None], ids=["apply with the key", "apply without a key"])
def test_a_forged_plan_is_refused_naming_what_differs(edit: str, reseal: str, apply_key: bytes | None) -> None:
    change, says, fresh_value = EDITS[edit]
    forged = _forged(change, reseal)
    with pytest.raises(StalePlanError) as refused:
        check_saved_plan(forged, _fresh(), _snapshot(forged), key=apply_key)
    message = str(refused.value)
    assert says in message and fresh_value in message, message
    assert "Nothing was changed" in message


def test_the_plan_as_made_is_accepted_with_its_key_and_without_one() -> None:
    saved = _saved(KEY)
    assert saved.digest.startswith("hmac-sha256:") and saved.seal == "hmac-sha256"
    check_saved_plan(saved, _fresh(), _snapshot(saved), key=KEY)
    check_saved_plan(saved, _fresh(), _snapshot(saved), key=None)  # the seal cannot be checked; the content is


def test_an_unsealed_plan_applies_without_a_key_and_is_refused_with_one() -> None:
    saved = _saved(None)
    assert saved.digest.startswith("sha256:") and saved.seal == "none"
    check_saved_plan(saved, _fresh(), _snapshot(saved), key=None)
    with pytest.raises(StalePlanError, match="not sealed"):
        check_saved_plan(saved, _fresh(), _snapshot(saved), key=KEY)


def test_a_plan_sealed_with_another_key_is_refused_even_when_its_content_is_right() -> None:
    saved = _saved(WRONG_KEY)
    with pytest.raises(StalePlanError, match="does not match KMIRROR_PLAN_KEY"):
        check_saved_plan(saved, _fresh(), _snapshot(saved), key=KEY)


def test_the_seal_is_a_keyed_hmac_of_what_apply_executes() -> None:
    saved = _saved(KEY)
    assert saved.digest == saved.keyed_digest(KEY) != saved.keyed_digest(WRONG_KEY)
    assert saved.digest != _saved(WRONG_KEY).digest
    reworded = saved.model_copy(update={"warnings": ("a note",)})
    assert reworded.seal_problem(KEY) is None  # warnings and reasons are for people, not sealed


@pytest.mark.parametrize("key", [KEY, None], ids=["sealed", "unsealed"])
def test_every_format_says_whether_the_plan_is_sealed(key: bytes | None) -> None:
    saved = _saved(key)
    document = json.loads(render_json(saved))
    assert document["seal"] == ("hmac-sha256" if key else "none")
    assert ("Unsealed:" in render_text(saved)) is (key is None)
    assert ("Unsealed:" in render_markdown(saved)) is (key is None)
    assert Plan.from_json(render_json(saved)) == saved  # `seal` is derived, never read back
