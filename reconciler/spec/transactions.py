"""The rules of an exactly-once flow's transaction settings, shared by load-time validation and the job.

A transaction is committed once it is older than `spark.kmirror.transactionIntervalMs`; the broker aborts one
open longer than the producers' `transaction.timeout.ms` (`replication.producer`, kmirror's default otherwise).

Must not: import a client or anything outside `spec/`; resolve a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TRANSACTION_INTERVAL_SETTING = "spark.kmirror.transactionIntervalMs"
DEFAULT_TRANSACTION_INTERVAL_MS = 10
#: The broker aborts a transaction open longer than this (a driver killed mid-transaction holds back
#: read_committed consumers of its partitions until then, or until the job starts again and fences it).
DEFAULT_TRANSACTION_TIMEOUT_MS = 30000


def whole_ms(value: Any) -> int | None:
    """A whole number of milliseconds, or None when `value` is not one (the models report that)."""
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def transaction_timeout_ms(producer: Mapping[str, Any]) -> int | None:
    """The transactional producers' `transaction.timeout.ms`: the flow's setting, else kmirror's default."""
    return whole_ms(producer.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))


def interval_problem(interval_ms: int, timeout_ms: int) -> str | None:
    """Why a transaction interval does not fit the transaction timeout (None: it does). The commit that follows
    the interval may wait for a flush; half the timeout leaves it as long again as the interval."""
    if interval_ms * 2 > timeout_ms:
        return (
            f"{TRANSACTION_INTERVAL_SETTING} is {interval_ms} ms, more than half of the transaction timeout "
            f"(transaction.timeout.ms, {timeout_ms} ms): the broker would abort transactions before they are "
            f"committed"
        )
    return None


def interval_hint(interval_ms: int) -> str:
    return (
        f"lower {TRANSACTION_INTERVAL_SETTING}, or set replication.producer transaction.timeout.ms to at least "
        f"{interval_ms * 2}"
    )
