"""Semantic validation across flows: cycles, collisions, and what is decided statically vs warned about."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.spec import DesiredState, validate_state

pytestmark = pytest.mark.unit


def state(*flows: dict[str, Any], clusters: str = "abc") -> DesiredState:
    return DesiredState.model_validate(
        {
            "version": 1,
            "clusters": {c: {"bootstrap_servers": f"{c}:9092"} for c in clusters},
            "state": {"cluster": clusters[0]},
            "flows": list(flows),
        }
    )


def flow(
    source: str, target: str, policy: str = "prefix", include: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": f"{source}-{target}",
        "source": source,
        "target": target,
        "naming": {"policy": policy},
    }
    if include is not None:
        spec["topics"] = {"include": include}
    spec.update(extra)
    return spec


def messages(desired: DesiredState, severity: str = "error") -> list[str]:
    return [i.message for i in validate_state(desired) if i.severity == severity]


def test_prefix_cycles_are_safe_like_mm2() -> None:
    assert messages(state(flow("a", "b"), flow("b", "a"))) == []
    assert messages(state(flow("a", "b"), flow("b", "c"), flow("c", "a"))) == []


def test_identity_cycle_is_an_error() -> None:
    (message,) = messages(state(flow("a", "b", "identity"), flow("b", "a", "identity")))
    assert "replication cycle a → b → a" in message


def test_identity_cycle_through_two_hops() -> None:
    (message,) = messages(state(flow("a", "b", "identity"), flow("b", "c", "identity"), flow("c", "a", "identity")))
    assert "a → b → c → a" in message


def test_mixed_cycle_loops_with_literal_names() -> None:
    # a -identity-> b -prefix-> a: "orders" comes back as "b.orders", which identity sends on again if included
    looping = state(flow("a", "b", "identity", [r"orders", r"b\.orders", r"b\.b\.orders"]), flow("b", "a"))
    assert any("cycle" in m for m in messages(looping))
    dying = state(flow("a", "b", "identity", ["orders"]), flow("b", "a"))
    assert messages(dying) == []


def test_identity_cycle_with_disjoint_filters_is_fine() -> None:
    assert messages(state(flow("a", "b", "identity", [r"east\..*"]), flow("b", "a", "identity", [r"west\..*"]))) == []
    assert messages(state(flow("a", "b", "identity", ["x"]), flow("b", "a", "identity", ["y"]))) == []


def test_mixed_cycle_is_fine_when_the_prefixed_names_coming_back_never_match_the_identity_filter() -> None:
    # a -identity-> b takes orders.*; b -prefix-> a sends everything back as "b.<topic>", which orders.* never takes
    assert messages(state(flow("a", "b", "identity", [r"orders\..*"]), flow("b", "a", "prefix", [".*"]))) == []
    # three hops: the prefixed names "c.<topic>" never match a's identity filter either
    three = state(flow("a", "b", "identity", [r"orders\..*"]), flow("b", "c", "identity", [".*"]), flow("c", "a"))
    assert messages(three) == []


def test_mixed_cycle_whose_identity_filter_takes_the_prefixed_names_is_still_refused() -> None:
    (message,) = messages(state(flow("a", "b", "identity", [r"b\..*", r"orders\..*"]), flow("b", "a")))
    assert "replication cycle a → b → a" in message
    (message,) = messages(state(flow("a", "b", "identity", [".*"]), flow("b", "a")))
    assert "replication cycle" in message


def test_disabled_flows_do_not_form_cycles() -> None:
    assert messages(state(flow("a", "b", "identity"), flow("b", "a", "identity", enabled=False))) == []


def test_two_identity_flows_into_one_target() -> None:
    literal = state(flow("a", "c", "identity", ["orders"]), flow("b", "c", "identity", ["orders", "x"]))
    assert any("both write remote topic 'orders' on 'c'" in m for m in messages(literal))
    regex = state(flow("a", "c", "identity", [r"orders\..*"]), flow("b", "c", "identity", [".*"]))
    assert messages(regex) == []
    assert any("may write the same remote topics" in m for m in messages(regex, "warning"))
    disjoint = state(flow("a", "c", "identity", [r"us\..*"]), flow("b", "c", "identity", [r"eu\..*"]))
    assert validate_state(disjoint) == []


def test_prefix_flows_into_one_target_never_collide() -> None:
    assert validate_state(state(flow("a", "c"), flow("b", "c"))) == []


def test_identity_and_prefix_into_one_target() -> None:
    # identity from a replicates a topic literally named "b.orders", which is also prefix's remote name for b:orders
    collide = state(flow("a", "c", "identity", [r"b\.orders"]), flow("b", "c", "prefix", ["orders"]))
    assert any("both write remote topic 'b.orders'" in m for m in messages(collide))


def test_issues_without_locations_still_read_well() -> None:
    (issue,) = validate_state(state(flow("a", "d")))
    assert (
        str(issue)
        == "kmirror.yaml: flows[0].target: unknown cluster 'd' (declare it under clusters:, or use one of: a, b, c)"
    )


def test_flow_digest_changes_with_the_job_spec_only() -> None:
    base = state(flow("a", "b"), flow("b", "c"))
    changed = state(flow("a", "b", include=["orders"]), flow("b", "c"))
    assert base.flow_digest("a-b") != changed.flow_digest("a-b")
    assert base.flow_digest("b-c") == changed.flow_digest("b-c")
    assert base.flow_digest("a-b").startswith("sha256:")
    spec = base.flow_effective_spec("a-b")
    assert set(spec) == {"flow", "clusters", "spark"} and set(spec["clusters"]) == {"a", "b"}
