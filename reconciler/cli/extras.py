"""Optional dependencies: which extra of the kmirror package brings which module, and the error when one is missing.

`pip install kmirror` is enough to validate, plan, show status and import (a CI runner that only plans downloads
no Spark); the replication job needs `kmirror[spark]` (pyspark and what only the job uses). A command that needs a
missing module says which extra to install, instead of a bare ModuleNotFoundError.

Must not: import an optional module at import time, or install anything.
"""

from __future__ import annotations

import importlib.util

from reconciler.errors import MissingExtraError

#: module -> the extra that installs it. A plan-only install has none of them.
EXTRA_OF_MODULE = {"pyspark": "spark", "py4j": "spark", "prometheus_client": "spark"}


def missing_extra_message(module: str, extra: str) -> str:
    return (
        f"this command needs {module}, which comes with kmirror's '{extra}' extra and is not installed here. "
        f"Install it with: pip install 'kmirror[{extra}]' (validate, plan, status, state and import work without "
        "it; apply needs it to deploy the replication job)."
    )


def extra_for(error: ModuleNotFoundError) -> str | None:
    """The extra that would have provided the module `error` is about, if any."""
    return EXTRA_OF_MODULE.get((error.name or "").split(".")[0])


def require_module(module: str) -> None:
    """Raise `MissingExtraError` naming the extra when `module` cannot be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or a broken one
        found = False
    if not found:
        raise MissingExtraError(missing_extra_message(module, EXTRA_OF_MODULE.get(module, "spark")))
