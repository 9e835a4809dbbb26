"""The plan: a frozen, versioned value computed by a pure function of desired, live and recorded state.

Nothing in this package does I/O or imports a Kafka or Spark client (import-linter holds it).
"""
