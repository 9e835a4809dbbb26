"""The entry point of kmirror's pre-commit hooks (`.pre-commit-hooks.yaml`): one run, many files.

pre-commit passes every staged file that matches a hook's `files` pattern as arguments at once, while
`kmirror validate -f FILE` and `kmirror schema --check -o FILE` take one file each. This runs that command for each
file in turn (each as its own `kmirror` process, so every file's report is exactly what the command prints) and
fails if any file fails:

    python -m reconciler.cli.precommit validate kmirror.yaml envs/prod/kmirror.yaml
    python -m reconciler.cli.precommit schema kmirror.schema.json

Must not: fix or write any file (a hook that edits files fails the commit for a reason the user cannot see).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

#: hook name -> the kmirror command run for one file, the file appended.
COMMANDS = {
    "validate": ["validate", "-f"],  # the offline checks: errors with file:line:column and the field
    "schema": ["schema", "--check", "-o"],  # a checked-in copy of the JSON Schema matches this kmirror
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m reconciler.cli.precommit {{{'|'.join(COMMANDS)}}} FILE...", file=sys.stderr)
        return 1
    hook, files = args[0], args[1:]
    failed = 0
    for file in files:
        # -I: the hooks run in the config repository; `-m` must not import a `reconciler/` folder it holds
        result = subprocess.run([sys.executable, "-I", "-m", "reconciler.cli", *COMMANDS[hook], file], check=False)
        failed += result.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
