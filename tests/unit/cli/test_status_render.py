"""`kmirror status` in text: the job's mode line names its task slots and the delivery guarantee it writes with."""

from __future__ import annotations

import pytest

from reconciler.app.flow_status import FlowStatus
from reconciler.cli.status import render

pytestmark = pytest.mark.unit


def _status(**job: object) -> FlowStatus:
    return FlowStatus("orders", "src", "dst", "local", "running", True, **job)  # type: ignore[arg-type]


def test_the_mode_line_says_exactly_once_when_the_running_job_writes_in_transactions() -> None:
    text = render([_status(mode="realtime", mode_reason="6 source partitions; local[12]", task_slots=12,
                           delivery="exactly_once")], color=False)  # fmt: skip
    assert "  real-time mode (6 source partitions; local[12], 12 task slots), exactly-once delivery" in text


def test_a_job_that_reported_no_delivery_keeps_the_mode_line_as_it_was() -> None:
    text = render([_status(mode="microbatch", task_slots=2)], color=False)
    assert "  micro-batch mode, 2 task slots\n" in text + "\n"
    assert "delivery" not in text
