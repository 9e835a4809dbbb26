"""Property tests: valid models survive a YAML round trip unchanged; the loader only ever raises SpecError."""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from reconciler.spec import DesiredState, SpecError, load_text

pytestmark = pytest.mark.unit

aliases = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
topic_regex = st.sampled_from([".*", "orders", r"orders\..*", "payments-[0-9]+", "(?:a|b)c", "x_y"])
durations = st.integers(min_value=1, max_value=10_000).map(lambda ms: timedelta(milliseconds=ms * 10))
values = st.one_of(
    st.text(alphabet="abcXYZ019 ._-", max_size=8),
    st.integers(min_value=-(2**31), max_value=2**31),
    st.booleans(),
    st.sampled_from(["${env:KAFKA_PASSWORD}", "${file:secrets/pw.txt}", 'x password="${env:P}";']),
)
props = st.dictionaries(st.from_regex(r"[a-z]{1,5}(\.[a-z]{1,5}){0,2}", fullmatch=True), values, max_size=3)


@st.composite
def desired_states(draw: st.DrawFn) -> DesiredState:
    names = draw(st.lists(aliases, min_size=2, max_size=4, unique=True))
    clusters = {
        name: {
            "bootstrap_servers": f"{name}:{draw(st.integers(1, 65535))}",
            "client": {k: v for k, v in draw(props).items() if k != "bootstrap.servers"},
        }
        for name in names
    }
    flows = []
    for i in range(draw(st.integers(0, 3))):
        source, target = draw(st.permutations(names))[:2]
        flows.append(
            {
                "name": f"flow-{i}",
                "source": source,
                "target": target,
                "enabled": draw(st.booleans()),
                "topics": {
                    "include": draw(st.lists(topic_regex, max_size=3)),
                    "exclude": draw(st.lists(topic_regex, max_size=2)),
                },
                "naming": draw(
                    st.sampled_from(
                        [
                            {"policy": "prefix", "separator": "."},
                            {"policy": "identity"},
                            {"policy": "template", "template": "m-{source}-{topic}"},
                        ]
                    )
                ),
                "topic_defaults": {"replication_factor": draw(st.sampled_from([-1, 1, 3])), "configs": draw(props)},
                "sync": {
                    "configs": draw(st.booleans()),
                    "acls": draw(st.booleans()),
                    "group_offsets": draw(st.booleans()),
                },
                "replication": {"start_from": draw(st.sampled_from(["earliest", "latest"])), "producer": draw(props)},
                "offsets": {"offset_lag_max": draw(st.integers(0, 10_000)), "checkpoint_interval": draw(durations)},
                "heartbeats": {"enabled": draw(st.booleans()), "interval": draw(durations)},
            }
        )
    return DesiredState.model_validate(
        {
            "version": 1,
            "clusters": clusters,
            "state": {"cluster": names[0]},
            "flows": flows,
            "prune": {"topics": draw(st.booleans()), "acls": draw(st.booleans()), "jobs": draw(st.booleans())},
        }
    )


def to_yaml(state: DesiredState) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(state.model_dump(mode="json"), buffer)
    return buffer.getvalue()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(desired_states())
def test_any_valid_model_round_trips_through_yaml(state: DesiredState) -> None:
    loaded = DesiredState.model_validate(YAML(typ="safe", pure=True).load(to_yaml(state)))
    assert loaded == state
    assert loaded.spec_digest() == state.spec_digest()
    for flow in state.flows:
        assert loaded.flow_digest(flow.name) == state.flow_digest(flow.name)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(desired_states())
def test_the_loader_reads_back_what_the_models_dump(state: DesiredState) -> None:
    try:
        loaded = load_text(to_yaml(state)).state
    except SpecError as exc:
        # semantic checks may refuse a generated topology (a cycle, a collision); never a model error
        assert all("cycle" in i.message or "remote topic" in i.message for i in exc.errors), str(exc)
        return
    assert loaded == state


yaml_like = st.lists(
    st.sampled_from(
        [
            *"ab:- \n\t{}[],'\"!&*#|>%@`?=$\\.",
            "version: 1\n",
            "clusters:\n",
            "  a: ",
            "- ",
            "<<: *a\n",
            "&a ",
            "!!binary ",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), yaml_like))
def test_the_loader_raises_only_its_own_error_on_arbitrary_text(text: str) -> None:
    with contextlib.suppress(SpecError):
        load_text(text)


def test_deep_nesting_and_recursive_aliases_are_errors_not_crashes() -> None:
    for text in ("[" * 5000 + "]" * 5000, "a: &x [*x]\n", "version: 1\nclusters: &c {a: *c}\n"):
        with pytest.raises(SpecError):
            load_text(text)
