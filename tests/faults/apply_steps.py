"""`kmirror apply` that freezes itself (SIGSTOP) when it reaches one step of its work, so that
`test_apply_killed.py` kills it (SIGKILL) exactly there instead of after a guessed delay:

    python tests/faults/apply_steps.py STEP apply -f kmirror.yaml --auto-approve

It is the real command (`reconciler.cli.main`, as `python -m reconciler.cli` runs it) with one function wrapped to
stop the whole process (every thread: the lock's lease renewer too) before or after its first call. Run as a file,
from the test's folder: it imports kmirror only, never the tests.
"""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

#: step -> (module, attribute path, "before" or "after" its first call): the executor's steps in an apply's order.
STEPS = {
    # the lock claimed (the state topic made on the first apply) and the state read; nothing planned yet
    "locked": ("reconciler.app.operations", "make_plan", "before"),
    # the plan made (the clusters read) and shown; nothing changed yet
    "planned": ("reconciler.app.executor", "Executor.run", "before"),
    # a batch's creates recorded as pending; the create call not made
    "intended": ("reconciler.state.store", "ApplySession.intend", "after"),
    # the topics created on the cluster; their outcome not recorded
    "created": ("reconciler.app.executor", "_create_topics", "after"),
    # a batch's outcomes recorded; not yet reported (and, in a first apply, the other cluster's batch not begun)
    "recorded": ("reconciler.state.store", "ApplySession.record_many", "after"),
    # every change recorded; the apply's history entry not written
    "finishing": ("reconciler.state.store", "ApplySession.finish", "before"),
    # the history entry written; the lock not released
    "finished": ("reconciler.state.store", "ApplySession.finish", "after"),
    # the runner's spark-submit started; the job not yet reported running
    "deploying": ("reconciler.runners.local", "LocalRunner._wait_started", "before"),
}


def _freeze() -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.kill(os.getpid(), signal.SIGSTOP)


def _wrap(step: str) -> None:
    module_name, path, when = STEPS[step]
    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    original: Callable[..., Any] = getattr(owner, name)
    calls = 0

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1 and when == "before":
            _freeze()
        result = original(*args, **kwargs)
        if calls == 1 and when == "after":
            _freeze()
        return result

    setattr(owner, name, wrapped)


def main() -> None:
    step, *args = sys.argv[1:]
    _wrap(step)
    from reconciler.cli.main import main as kmirror

    sys.argv = ["kmirror", *args]
    kmirror()


if __name__ == "__main__":
    main()
