"""kmirror's benchmarks: `python -m benchmarks.replication`, `plan_scale.py`, `checkpoint_cycle.py`."""
