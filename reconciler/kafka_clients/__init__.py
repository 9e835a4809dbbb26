"""kmirror's Kafka I/O shared by the control plane and the job: the admin client (`admin`), client quotas through
a small Java tool (`client_quotas`), MM2's offset-syncs and checkpoints topics (`offset_syncs`) and one
checkpoint cycle (`checkpointer`), which the job runs on a timer and the cutover runs once.

Must not: import the planner, the application layer, the job or the runners.
"""
