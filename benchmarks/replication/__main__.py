"""`python -m benchmarks.replication ...` (from the repository root)."""

import sys

from benchmarks.replication.cli import main

sys.exit(main())
