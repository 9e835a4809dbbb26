"""The typed forms of each resource kind: a change's `before` and `after` (`reconciler.plan.definition`, one
change model per kind as Terraform's `plans.Change`), so the executor, the state store and the renderers read named
fields, never string keys.

A form is what a resource looks like (as read live at plan time: `before`; as it will be: `after`). Its JSON is
the plan file's and the state topic's record of the resource: fields that are not set are left out, so a plan
written by this version reads as the previous one did, plus `format_version` 2.

Pure values. Must not: import a client, an adapter or the executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.resources.deployments import Deployment, deployment_of


class Form(BaseModel):
    """A resource's form: frozen, no unknown fields; a field left unset (None, not given) is left out of its JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        given = self.model_fields_set
        return {k: v for k, v in data.items() if v is not None or k in given}


# -- topics -------------------------------------------------------------------------------------------------------
class TopicSource(Form):
    """Where a remote topic's records come from: the executor stops that flow's job before deleting the topic."""

    cluster: str
    topic: str
    flow: str


class TopicForm(Form):
    cluster: str
    name: str
    partitions: int
    replication_factor: int
    #: The whole explicit config set the topic has (or will have): the executor derives SET/DELETE from the diff.
    configs: dict[str, str] = Field(default_factory=dict)
    source: TopicSource | None = None


# -- ACLs ---------------------------------------------------------------------------------------------------------
class AclGrant(Form):
    host: str
    permission: Literal["ALLOW", "DENY"]


class AclForm(Form):
    cluster: str
    principal: str
    operation: str
    topic: str
    pattern_type: str = "LITERAL"
    entries: tuple[AclGrant, ...] = ()
    #: The entries kmirror created (a change never touches the others).
    managed: tuple[AclGrant, ...] | None = None


# -- quotas -------------------------------------------------------------------------------------------------------
class QuotaForm(Form):
    cluster: str
    client_id: str
    flow: str | None = None
    consumer_byte_rate: float | None = None
    producer_byte_rate: float | None = None

    def rates(self) -> dict[str, float]:
        """The quota names kmirror sets on this client id, with their values."""
        return {
            name: value
            for name, value in (
                ("consumer_byte_rate", self.consumer_byte_rate),
                ("producer_byte_rate", self.producer_byte_rate),
            )
            if value is not None
        }


# -- jobs ---------------------------------------------------------------------------------------------------------
class EosGroup(Form):
    """The exactly-once group a removed flow's job may have committed its source positions to."""

    cluster: str
    group: str
    exactly_once: bool


class JobObserved(Form):
    """A job as its runner reported it at plan time (a job change's `before`)."""

    running: bool | None = None
    spec_digest: str | None = None
    #: On a stop: the flow was removed from the file (not only disabled), so its checkpoint is forgotten.
    removed: bool | None = None
    eos_group: EosGroup | None = None


JobOperation = Literal["deploy", "redeploy", "move", "restart"]


class JobForm(Form):
    flow: str
    operation: JobOperation
    runner: str
    spec_digest: str
    #: The flow's effective spec, as `reconciler.jobcontract.spec.JobSpec` hands it to the job.
    spec: EffectiveSpec
    moved_from: str | None = None

    @property
    def clusters(self) -> set[str]:
        """The source and target cluster of the flow."""
        return {self.spec.flow.source, self.spec.flow.target}


class JobRecord(JobForm):
    """A job as apply records it in the state topic: its form plus the runner's record of the deployment."""

    deployment: Deployment | None = None

    @field_validator("deployment", mode="before")
    @classmethod
    def _migrated(cls, value: object) -> object:
        # records written before deployments named their runner (`deployment_of` migrates them)
        return deployment_of(value) if isinstance(value, Mapping) else value

    @classmethod
    def of(cls, form: JobForm, deployment: Deployment) -> JobRecord:
        given = {name: getattr(form, name) for name in form.model_fields_set}
        return cls.model_validate({**given, "deployment": deployment})


# -- group offsets ------------------------------------------------------------------------------------------------
class OffsetRow(Form):
    """One partition's offset: on the target (`topic`, `partition`), translated from the source's commit."""

    topic: str
    partition: int
    source_topic: str | None = None
    source_offset: int | None = None
    target_offset: int | None = None
    current_offset: int | None = None
    metadata: str | None = None
    translation: str | None = None
    conservative_offset: int | None = None
    why: str | None = None


class GroupOffsetsForm(Form):
    cluster: str
    group: str
    #: The flow whose job's offset-syncs translated the group (its job change goes first), and its source cluster.
    flow: str | None = None
    source_cluster: str | None = None
    translation: str | None = None
    partitions: tuple[OffsetRow, ...] = ()

    def commits(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
        """What writing this form commits: the target offset per (topic, partition), and the source metadata of the
        partitions that carry one."""
        offsets = {(r.topic, r.partition): r.target_offset for r in self.partitions if r.target_offset is not None}
        metadata = {(r.topic, r.partition): r.metadata for r in self.partitions if r.metadata}
        return offsets, metadata
