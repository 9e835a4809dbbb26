"""A saved plan is whole: apply refuses one whose changes, `after` values or digests were edited after
`kmirror plan --out` wrote it, or one made from another desired state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from reconciler.app.operations import StalePlanError, check_saved_plan
from reconciler.plan.definition import Plan
from reconciler.state.records import StateSnapshot
from tests.unit.plan.builders import desired, live, owned, plan, topic

pytestmark = pytest.mark.unit


def _saved() -> Plan:
    ds = desired("topics: {include: ['orders']}")
    return Plan.from_json(plan(ds, live(src=[topic("orders", partitions=2)]), owned()).to_json())


def _edited(saved: Plan, edit: Callable[[dict[str, Any]], object]) -> Plan:
    doc = json.loads(saved.to_json())
    edit(doc)
    return Plan.from_json(json.dumps(doc))


def _snapshot(saved: Plan) -> StateSnapshot:
    return StateSnapshot(lineage=saved.state.lineage, serial=saved.state.serial)


def test_a_plan_as_written_is_accepted() -> None:
    saved = _saved()
    assert saved.digest.startswith("sha256:") and saved.digest == saved.content_digest()
    check_saved_plan(saved, saved, _snapshot(saved))


def test_a_plan_whose_after_values_were_edited_is_refused() -> None:
    saved = _saved()

    def more_partitions(doc: dict[str, Any]) -> None:
        change = next(c for c in doc["changes"] if c["address"] == "topic/dst/src.orders")
        change["after"]["partitions"] = 64

    edited = _edited(saved, more_partitions)
    with pytest.raises(StalePlanError, match="altered after it was made"):
        check_saved_plan(edited, saved, _snapshot(saved))


def test_a_plan_whose_spec_digest_was_edited_is_refused() -> None:
    saved = _saved()
    edited = _edited(saved, lambda doc: doc.update(spec_digest="sha256:" + "0" * 64))
    with pytest.raises(StalePlanError, match="altered after it was made"):
        check_saved_plan(edited, saved, _snapshot(saved))


def test_a_plan_with_its_digest_recomputed_after_an_edit_is_still_refused_for_another_spec() -> None:
    saved = _saved()
    edited = _edited(saved, lambda doc: doc.update(spec_digest="sha256:" + "0" * 64)).sealed()
    with pytest.raises(StalePlanError, match="made from a desired state with digest sha256:0000"):
        check_saved_plan(edited, saved, _snapshot(saved))


def test_a_plan_without_a_digest_is_refused() -> None:
    saved = _saved()
    edited = _edited(saved, lambda doc: doc.pop("digest"))
    with pytest.raises(StalePlanError, match="digest \\(missing\\)"):
        check_saved_plan(edited, saved, _snapshot(saved))


def test_reasons_and_warnings_are_not_part_of_the_digest() -> None:
    saved = _saved()

    def reword(doc: dict[str, Any]) -> None:
        doc["changes"][0]["reason"] = "reworded"
        doc["warnings"] = ["a note"]

    check_saved_plan(_edited(saved, reword), saved, _snapshot(saved))
