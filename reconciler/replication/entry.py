"""The file spark-submit runs for a replication job; everything it does is in `reconciler.replication.job`.

Must not: hold logic. It exists because spark-submit takes a file path, not a module name.
"""

import sys

from reconciler.replication.job import main

if __name__ == "__main__":
    sys.exit(main())
