"""The suite's scheduling on `pytest -n 2` (tests/conftest.py): the long groups it starts first must exist, or a
renamed module silently falls back to file order and a long module taken last leaves the other worker idle."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import _LONG_GROUPS
from tests.conftest import test_group as group_of  # not collected as a test

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_every_long_group_names_test_modules_that_exist() -> None:
    modules = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")]
    groups = {group_of(m) for m in modules}
    assert [g for g in _LONG_GROUPS if g not in groups] == []
    assert len(set(_LONG_GROUPS)) == len(_LONG_GROUPS)
