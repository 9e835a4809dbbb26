"""kmirror: a declarative, plan/apply reconciler for Kafka cross-cluster replication.

Layering (held by import-linter, see pyproject.toml):
  spec, policy, plan, render   pure values and functions; no Kafka, Spark or file-system side effects
  adapters, devenv, replication, executor   side effects at the edges
  cli                          wires the two together and owns all terminal output
"""

__version__ = "0.1.0"
