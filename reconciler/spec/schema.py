"""The JSON Schema of `kmirror.yaml`, generated from the models, for editors (yaml-language-server) and CI.

`schemas/kmirror.schema.json` is this function's output; `kmirror schema --check` fails when it is stale.
Pure: builds text, never writes it (the CLI does).
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.spec.models import DesiredState

SCHEMA_ID = "https://kmirror.dev/schemas/kmirror.schema.json"
SCHEMA_PATH = "schemas/kmirror.schema.json"


def json_schema() -> dict[str, Any]:
    """The schema as a dict: draft 2020-12, defaults included, descriptions from the models."""
    schema = DesiredState.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kmirror desired state",
        "description": "kmirror.yaml: clusters, replication flows between them, and policies (version 1).",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def schema_text() -> str:
    """The schema file's exact content: sorted keys, two-space indent, trailing newline."""
    return json.dumps(json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
