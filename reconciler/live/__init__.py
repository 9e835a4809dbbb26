"""What the clusters hold right now, as plain frozen values (read by `reconciler.adapters`, used by the planner)."""
