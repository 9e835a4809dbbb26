"""Schema subjects planned like topics: a flow with `sync.schemas` registers its topics' TopicNameStrategy subjects on
the target under the remote topic's name, records the source id -> target id map, shows drift, prunes only with
`prune.schemas`, and plans nothing after an apply; the spec's registry settings are validated with locations."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from reconciler.live.model import LiveState
from reconciler.live.schemas import RegistryState, SchemaReference, SchemaVersion
from reconciler.plan.definition import Action
from reconciler.resources.addresses import Kind
from reconciler.resources.recorded import RecordedResource, RecordedState
from reconciler.spec import DesiredState, SpecError, load_text
from tests.unit.plan.builders import by_address, live, owned, plan, topic

pytestmark = pytest.mark.unit

ORDERS_V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
ORDERS_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "n", "type": "int", "default": 0}],
    }
)


def _desired(sync: str = "true", prune: str = "", extra: str = "") -> DesiredState:
    return load_text(
        f"""
version: 1
clusters:
  src: {{bootstrap_servers: "127.0.0.1:1", schema_registry: {{url: "http://127.0.0.1:8081"}}}}
  dst: {{bootstrap_servers: "127.0.0.1:2", schema_registry: {{url: "http://127.0.0.1:8082/"}}}}
state: {{cluster: dst}}
flows:
  - name: f
    source: src
    target: dst
    topics: {{include: ["orders", "payments"]}}
    sync: {{schemas: {sync}{extra}}}
{prune}
"""
    ).state


def _live(
    source: dict[str, tuple[SchemaVersion, ...]], target: dict[str, tuple[SchemaVersion, ...]], **levels: str
) -> LiveState:
    base = live(src=[topic("orders"), topic("payments")], dst=[topic("src.orders"), topic("src.payments")])
    return replace(
        base,
        schemas={
            "src": RegistryState(source, {k.replace("_", "-"): v for k, v in levels.items()}),
            "dst": RegistryState(target),
        },
    )


def _plan(ds: DesiredState, lv: LiveState, rec: RecordedState | None = None) -> object:
    return plan(ds, lv, rec if rec is not None else owned("src.orders", "src.payments"))


def _schemas(p: object) -> dict[str, object]:
    return {a: c for a, c in by_address(p).items() if c.kind == Kind.SCHEMA}  # type: ignore[arg-type]


def _owned_after(changes: dict[str, object], ids: dict[str, dict[str, int]]) -> RecordedState:
    base = owned("src.orders", "src.payments")
    resources = dict(base.resources)
    for address, change in changes.items():
        after = change.after.model_dump(mode="json")  # type: ignore[attr-defined]
        after["ids"] = {**after["ids"], **ids.get(address, {})}
        resources[address] = RecordedResource(address, "schema", after)
    return RecordedState(lineage=base.lineage, serial=base.serial, resources=resources)


def test_topic_subjects_are_planned_under_the_remote_topics_name_with_versions_and_compatibility() -> None:
    source = {
        "orders-value": (SchemaVersion(1, 1, ORDERS_V1), SchemaVersion(2, 2, ORDERS_V2)),
        "orders-key": (SchemaVersion(1, 3, '"string"'),),
        "unrelated-value": (SchemaVersion(1, 4, '"int"'),),  # no replicated topic: not planned
        "Order": (SchemaVersion(1, 1, ORDERS_V1),),  # RecordNameStrategy: not planned
    }
    changes = _schemas(_plan(_desired(), _live(source, {}, orders_value="BACKWARD")))
    assert set(changes) == {"schema/dst/src.orders-value", "schema/dst/src.orders-key"}
    value = changes["schema/dst/src.orders-value"]
    assert value.action == Action.CREATE and value.before is None  # type: ignore[attr-defined]
    after = value.after.model_dump(mode="json")  # type: ignore[attr-defined]
    assert after["source_subject"] == "orders-value" and after["compatibility"] == "BACKWARD"
    assert {n: v["source_id"] for n, v in after["versions"].items()} == {"1": 1, "2": 2}
    assert after["versions"]["1"]["schema"] == ORDERS_V1  # the plan file's name for the text
    assert after["ids"] == {}


def test_a_plan_after_apply_is_empty_and_a_new_source_version_is_an_update() -> None:
    source = {"orders-value": (SchemaVersion(1, 1, ORDERS_V1),)}
    first = _schemas(_plan(_desired(), _live(source, {})))
    # The target gave the schema id 7 (it held unrelated schemas): what apply records.
    recorded = _owned_after(first, {"schema/dst/src.orders-value": {"1": 7}})
    spaced = json.dumps(json.loads(ORDERS_V1), indent=2)  # registries re-serialise: the same schema
    target = {"src.orders-value": (SchemaVersion(1, 7, spaced),)}
    assert _schemas(_plan(_desired(), _live(source, target), recorded)) == {}

    source2 = {"orders-value": (SchemaVersion(1, 1, ORDERS_V1), SchemaVersion(2, 2, ORDERS_V2))}
    change = _schemas(_plan(_desired(), _live(source2, target), recorded))["schema/dst/src.orders-value"]
    assert change.action == Action.UPDATE and change.after.ids == {"1": 7}  # type: ignore[attr-defined]
    assert "register source version(s) 2" in change.reason  # type: ignore[attr-defined]
    before = change.before.model_dump(mode="json")  # type: ignore[attr-defined]
    after = change.after.model_dump(mode="json")  # type: ignore[attr-defined]
    assert set(before["versions"]) == {"1"} and set(after["versions"]) == {"1", "2"}  # the diff: + versions.2
    assert {k: v for k, v in before.items() if k != "versions"} == {k: v for k, v in after.items() if k != "versions"}


def test_an_existing_target_subject_is_adopted_and_extra_target_versions_are_drift() -> None:
    source = {"orders-value": (SchemaVersion(1, 1, ORDERS_V1),)}
    target = {"src.orders-value": (SchemaVersion(1, 9, '"string"'), SchemaVersion(2, 10, ORDERS_V1))}
    p = _plan(_desired(), _live(source, target))
    change = _schemas(p)["schema/dst/src.orders-value"]
    assert change.action == Action.UPDATE and change.after.ids == {"1": 10}  # type: ignore[attr-defined]
    assert any("version(s) 1 that are not on the source" in w for w in p.warnings)


def test_a_subject_that_is_no_longer_synced_is_deleted_only_with_prune_schemas() -> None:
    source = {"orders-value": (SchemaVersion(1, 1, ORDERS_V1),)}
    target = {"src.orders-value": (SchemaVersion(1, 7, ORDERS_V1),)}
    recorded = _owned_after(_schemas(_plan(_desired(), _live(source, target))), {})
    kept = _plan(_desired(), _live({}, target), recorded)
    assert _schemas(kept) == {} and any("prune.schemas: true deletes it" in w for w in kept.warnings)
    pruned = _schemas(_plan(_desired(prune="prune: {schemas: true}"), _live({}, target), recorded))
    assert pruned["schema/dst/src.orders-value"].action == Action.DELETE  # type: ignore[attr-defined]


def test_excluded_subjects_and_versions_with_references_are_not_planned() -> None:
    source = {
        "orders-value": (SchemaVersion(1, 1, ORDERS_V1, references=(SchemaReference("x", "X", 1),)),),
        "payments-value": (SchemaVersion(1, 2, '"int"'),),
    }
    p = _plan(_desired(extra=", schema_subjects_exclude: ['payments-.*']"), _live(source, {}))
    change = _schemas(p)["schema/dst/src.orders-value"]
    assert change.after.versions == {}  # type: ignore[attr-defined]
    assert "schema/dst/src.payments-value" not in _schemas(p)
    assert any("use schema references" in w for w in p.warnings)


def test_unread_registries_plan_nothing() -> None:
    source = {"orders-value": (SchemaVersion(1, 1, ORDERS_V1),)}
    lv = _live(source, {})
    assert _schemas(_plan(_desired(), replace(lv, schemas={"src": lv.schemas["src"]}))) == {}


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_text(text, file="k.yaml")
    return [f"{i.line}: {i.message}" for i in e.value.issues]


def test_registry_settings_are_validated_with_their_line() -> None:
    errors = _errors(
        """version: 1
clusters:
  src:
    bootstrap_servers: "127.0.0.1:1"
    schema_registry:
      url: "https://sr:8081"
      basic_auth: {username: u, password: hunter2}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
flows:
  - {name: f, source: src, target: dst, sync: {schemas: true}}
"""
    )
    assert "7: a secret is written inline; secrets must not be kept in the file" in errors
    assert any(e.startswith("11: sync.schemas needs the schema registry of the target cluster 'dst'") for e in errors)
    assert all("hunter2" not in e for e in errors)
    bad_url = _errors(
        'version: 1\nclusters:\n  a: {bootstrap_servers: "h:1", schema_registry: {url: "sr:8081"}}\n'
        "state: {cluster: a}\n"
    )
    assert any(e.startswith("3: ") and "not an http:// or https:// url" in e for e in bad_url)
