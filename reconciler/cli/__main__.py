"""`python -m reconciler.cli` runs the `kmirror` command (used where the console script is not on PATH)."""

from reconciler.cli.main import main

main()
