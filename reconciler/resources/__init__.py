"""kmirror's resource vocabulary, shared by the planner, the executor, the state store and the live-state reader:
the kinds of resources, their typed addresses (parsed once, printed once) and the recorded state.

Must not: import anything of kmirror but `reconciler.errors`, or any client.
"""
