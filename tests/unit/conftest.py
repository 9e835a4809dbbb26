"""Unit tests start from a scrubber that knows nothing.

The scrubber (`reconciler.spec.redaction`) is process-wide: every value a test resolves, secrets and per-environment
values alike, would otherwise be replaced in the output of every later test of the session (`a:9092` read through
`${env:..}` in one test shows as that reference in the next one's plan), so results would depend on test order.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.spec.redaction import forget_all


@pytest.fixture(autouse=True)
def _scrubber_knows_nothing() -> Iterator[None]:
    forget_all()
    yield
    forget_all()
