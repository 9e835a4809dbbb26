"""The spec file a replication job is started with: a flow's effective spec plus where its paths resolve.

The runner writes it (`JobSpec.write`) into the job's folder (`layout.py`), the job reads it (`JobSpec.read`).
It holds exactly the flow's effective spec (`DesiredState.flow_effective_spec`): the flow, its two clusters and
the Spark settings, with secrets as the `${env:..}`/`${file:..}` references the user wrote, plus the folder of the
desired-state file (`${file:..}` paths resolve against it) and the file's state topic. The job resolves
references from its own environment at the moment it builds a client. Where the checkpoint lives is the runner's
to say (`layout.py`).

Must not: hold a resolved secret, or do anything but (de)serialise and rebuild the spec models.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializationInfo, ValidationError, model_serializer

from reconciler.errors import ConfigError
from reconciler.resources.deployments import Deployment
from reconciler.spec.defaults import DEFAULT_STATE_TOPIC
from reconciler.spec.models import ClusterSpec, DesiredState, FlowSpec, SparkSpec

FORMAT_VERSION = 1


class EffectiveSpec(BaseModel):
    """A flow's effective spec, typed: the flow, the clusters it names, the Spark settings and, for a throttled
    flow, the client ids its quotas are set on (`DesiredState.flow_effective_spec`, whose digest is the flow's).

    Its JSON is exactly the JSON it was read from (each model dumps the fields it was given: the effective spec
    leaves out what does not concern the job, e.g. the throttle, a registry no flow syncs with), so a plan file, the
    state topic and the job's spec file hold the same bytes as before it was typed, and its digest holds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    flow: FlowSpec
    clusters: dict[str, ClusterSpec]
    spark: SparkSpec
    #: The client ids the flow's consumer and producer run with when it is throttled ("source"/"target" -> id).
    client_ids: dict[str, str] | None = None
    #: A throttled flow's rate in bytes per second (outside the digest): the job sizes its fetches by it.
    throttle: int | None = None

    @classmethod
    def of(cls, desired: DesiredState, flow: str) -> EffectiveSpec:
        return cls.model_validate(desired.flow_effective_spec(flow))

    @model_serializer(mode="plain")
    def _as_given(self, info: SerializationInfo) -> dict[str, object]:
        mode = info.mode
        out: dict[str, object] = {
            "flow": self.flow.model_dump(mode=mode, exclude_unset=True),
            "clusters": {a: c.model_dump(mode=mode, exclude_unset=True) for a, c in self.clusters.items()},
            "spark": self.spark.model_dump(mode=mode, exclude_unset=True),
        }
        if "client_ids" in self.model_fields_set:
            out["client_ids"] = self.client_ids
        if "throttle" in self.model_fields_set:
            out["throttle"] = self.throttle
        return out


def eos_flow_for(flow: str, previous: Deployment | None) -> str:
    """The name the flow's exactly-once group and transactional ids are keyed by: the one its previous deployment
    recorded (a renamed flow carries its old name's), else the flow's own."""
    recorded = previous.eos_flow if previous is not None else None
    return recorded or flow


def next_generation(previous: Deployment | None) -> int:
    """The generation of a new deployment of the flow: one past the one the state recorded (1 for the first, and
    for a deployment recorded before generations existed). An exactly-once job commits it with its positions; a
    writer that finds a newer one stops for good instead of fencing the newer job back."""
    recorded = previous.generation if previous is not None else None
    return (recorded if recorded is not None and recorded > 0 else 0) + 1


@dataclass(frozen=True)
class JobSpec:
    """What one flow's job runs with: its effective spec, where its paths resolve, what keys what it owns."""

    flow_name: str
    effective: EffectiveSpec
    digest: str
    base_dir: Path
    #: The state topic of the desired-state file the flow is in: with the flow's name it keys what the job owns on
    #: the clusters (its exactly-once transactional ids and group). Older spec files have none: the default one.
    state_topic: str = DEFAULT_STATE_TOPIC
    #: The flow name its exactly-once group and transactional ids are keyed by: the name the flow had when its job
    #: was first deployed, carried over a `moved:` rename so the renamed job resumes from the same group (None:
    #: `flow_name`).
    eos_flow: str | None = None
    #: The deployment's generation (`next_generation`), recorded in the state with the deployment; 0 in spec files
    #: written before generations existed.
    generation: int = 0

    @classmethod
    def for_deploy(
        cls,
        flow: str,
        effective: EffectiveSpec,
        digest: str,
        base_dir: Path,
        state_topic: str,
        previous: Deployment | None,
    ) -> JobSpec:
        """The spec of a new deployment of `flow`, after `previous` (its last deployment's record): the exactly-once
        name it carries over and the next generation."""
        return cls(
            flow, effective, digest, base_dir, state_topic, eos_flow_for(flow, previous), next_generation(previous)
        )

    @property
    def eos_name(self) -> str:
        return self.eos_flow or self.flow_name

    @property
    def flow(self) -> FlowSpec:
        return self.effective.flow

    @property
    def spark(self) -> SparkSpec:
        return self.effective.spark

    def cluster(self, alias: str) -> ClusterSpec:
        try:
            return self.effective.clusters[alias]
        except KeyError:
            raise ConfigError(f"the job spec of flow {self.flow_name} names no cluster '{alias}'") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "flow": self.flow_name,
            "digest": self.digest,
            "base_dir": str(self.base_dir),
            "state_topic": self.state_topic,
            "eos_flow": self.eos_name,
            "generation": self.generation,
            "spec": self.effective.model_dump(mode="json"),
        }

    def write(self, path: Path) -> None:
        """Write atomically (a job starting at that moment never reads half a file); owner-only permissions."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(self.to_json(), out, indent=2, sort_keys=True)
            out.write("\n")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> JobSpec:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the job spec {path}: {exc}") from exc
        if data.get("format_version") != FORMAT_VERSION:
            raise ConfigError(
                f"{path}: job spec format {data.get('format_version')!r} is not {FORMAT_VERSION}; "
                "redeploy the flow with this kmirror version"
            )
        state_topic = data.get("state_topic") or DEFAULT_STATE_TOPIC
        eos_flow = data.get("eos_flow") if isinstance(data.get("eos_flow"), str) else None
        generation = data.get("generation") if isinstance(data.get("generation"), int) else 0
        try:  # validated now, so a broken file fails before Spark starts
            effective = EffectiveSpec.model_validate(data["spec"])
        except ValidationError as exc:
            raise ConfigError(f"{path}: the flow's spec is not valid: {exc}") from exc
        return cls(data["flow"], effective, data["digest"], Path(data["base_dir"]), state_topic, eos_flow, generation)
