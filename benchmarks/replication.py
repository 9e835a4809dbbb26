"""`python benchmarks/replication.py ...`: the same as `python -m benchmarks.replication ...` (the package)."""

import runpy
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # the repository root, not benchmarks/
runpy.run_module("benchmarks.replication", run_name="__main__", alter_sys=True)
