"""The application layer: the use cases the CLI calls, each over the planner, the state store, the adapters and
the runners: plan and apply (`operations`, `executor`, `preflight`), adoption of existing topics (`adoption`),
the exact cutover (`cutover`) and `kmirror status` (`flow_status`).

Must not: print, parse arguments or exit (the CLI's job); be imported by the planner, the job, the runners or
the adapters.
"""
