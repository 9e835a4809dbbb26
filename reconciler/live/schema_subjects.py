"""Which schema subjects a flow with `sync.schemas` concerns: Confluent's TopicNameStrategy subjects of its replicated
topics (`<topic>-key`, `<topic>-value`), named on the target after the remote topic (the flow's naming policy).

The registry reader (what to read) and the planner (what to plan) both ask this; the answer lives here, below both.

Pure: values in, values out. Must not: import a client, the planner or an adapter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from reconciler.spec.models import DesiredState, FlowSpec

SUFFIXES = ("-key", "-value")


def schema_flows(desired: DesiredState) -> list[FlowSpec]:
    """The enabled flows that sync schemas."""
    return [f for f in desired.enabled_flows if f.sync.schemas]


def flow_subjects(flow: FlowSpec, remote_of: Mapping[str, str], source_subjects: Iterable[str]) -> dict[str, str]:
    """Source subject -> target subject, for the TopicNameStrategy subjects of the flow's replicated topics
    (`remote_of`: source topic -> remote topic) that the source registry holds and the flow does not exclude."""
    excluded = [re.compile(p) for p in flow.sync.schema_subjects_exclude]
    out = {}
    for subject in source_subjects:
        for suffix in SUFFIXES:
            topic = subject.removesuffix(suffix)
            if topic != subject and topic in remote_of and not any(p.fullmatch(subject) for p in excluded):
                out[subject] = remote_of[topic] + suffix
    return out
