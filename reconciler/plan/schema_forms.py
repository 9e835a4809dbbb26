"""The typed form of a `schema/<cluster>/<subject>` row (`reconciler.plan.definition.SchemaChange`): a schema
registry subject a flow with `sync.schemas` registers on its target, as `reconciler.plan.forms` holds the other kinds'.

Pure values. Must not: import a client, an adapter or the executor.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from reconciler.plan.forms import Form


class SchemaVersionForm(Form):
    """One source version: its id on the source registry, its type and its text."""

    source_id: int
    schema_type: str = "AVRO"
    schema_text: str = Field(alias="schema")

    # `schema` is the Confluent API's (and the plan file's) name; as a field name it would shadow BaseModel.schema.
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class SchemaForm(Form):
    cluster: str
    subject: str
    flow: str
    source_cluster: str
    source_subject: str
    #: The source's versions by version number ("1", "2", ...), so a plan shows a new one as `+ versions.2...`.
    versions: dict[str, SchemaVersionForm] = Field(default_factory=dict)
    #: The source subject's own compatibility level (None: the registry's default is left alone).
    compatibility: str | None = None
    #: Source id -> target id, as far as the target holds the versions (apply records the whole map).
    ids: dict[str, int] = Field(default_factory=dict)
