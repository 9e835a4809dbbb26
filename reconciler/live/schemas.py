"""What a schema registry holds, as the planner compares it: per subject its versions (id, schema text, type,
references) and its own compatibility level, per cluster whose registry was read.

Plain frozen values, read by `reconciler.adapters.schema_registry` and handed to `reconciler.plan.schemas`.
Must not: hold a client, a url's credentials or anything resolved from a secret reference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SchemaReference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject, as the Confluent API returns it (`schema_type` is AVRO when it says nothing)."""

    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def same_schema(self, other: SchemaVersion) -> bool:
        """The same schema, however it was spaced: registries store Avro and JSON Schema re-serialised."""
        return self.schema_type == other.schema_type and canonical(self.schema, self.schema_type) == canonical(
            other.schema, other.schema_type
        )


def canonical(schema: str, schema_type: str) -> Any:
    """A comparable form: the parsed JSON of Avro and JSON Schema (spacing and key order do not matter), the text of
    Protobuf."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.loads(schema)
        except ValueError:
            return schema
    return schema.strip()


@dataclass(frozen=True)
class RegistryState:
    """One registry: subject -> its versions in version order, and the subjects' own compatibility levels."""

    subjects: Mapping[str, tuple[SchemaVersion, ...]] = field(default_factory=dict)
    compatibility: Mapping[str, str] = field(default_factory=dict)
    #: The registry takes explicit ids (Confluent Schema Registry's IMPORT mode): ids can be kept.
    supports_import: bool = False
