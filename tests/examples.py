"""What the examples' READMEs tell an operator to set: each example is validated and planned with exactly that.

An example README's shell block exports what the example needs besides its secrets (`export
KMIRROR_FILE_ROOTS=/etc/kafka` for key files kept outside the example's folder); secrets are written with a
placeholder value (`export CENTRAL_KAFKA_PASSWORD=...`) and left out here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(\S+)$", re.M)


def readme_env(example: str) -> dict[str, str]:
    """The variables `examples/<example>/README.md` exports with a real value (placeholders `...` left out)."""
    text = (EXAMPLES / example / "README.md").read_text(encoding="utf-8")
    return {name: value for name, value in _EXPORT.findall(text) if value != "..."}
