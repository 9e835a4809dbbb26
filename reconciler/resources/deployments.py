"""A job's deployment as its runner recorded it: one record per runner kind, kept with the job in the state topic
(the `deployment` of each `job/<flow>` record) and in the job folder's `runner.json`.

A runner returns one from `deploy` and reads its flow's back to stop, report, move or forget the job: where its
folder and checkpoint are, the name its exactly-once group is keyed by, its generation, and the runner's own identity
of it (a local pid on a host, a standalone submission id at a REST URL, a YARN application id).

Its JSON is the state topic's: fields a record was written without stay out of it (`Form`-like), so a record read
and written again is the same bytes. Records written before the `runner` field existed are read by
`deployment_of` (a `submission_id` means standalone, else local).

Must not: import anything of kmirror (a runner builds these; the executor and the planner only carry them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_validator,
    model_serializer,
)


class _Deployment(BaseModel):
    """What every runner records. All optional: a renamed flow's carried-over record (`FlowRunners.move`) holds only
    the runner, checkpoint, exactly-once name and generation, and older versions wrote fewer fields."""

    #: Records written by other kmirror versions may carry more; nothing reads it.
    model_config = ConfigDict(frozen=True, extra="ignore")

    flow: str | None = None
    #: The spec digest the job was deployed with.
    digest: str | None = None
    #: The job's folder (a local path, or a URI on HDFS for YARN).
    folder: str | None = None
    checkpoint: str | None = None
    #: The flow name its exactly-once group and transactional ids are keyed by (a renamed flow carries its old one).
    eos_flow: str | None = None
    generation: int | None = None
    started_at: float | None = None
    stopped_at: float | None = None

    @field_validator("generation", mode="before")
    @classmethod
    def _whole(cls, value: object) -> object:
        # a generation that is not a whole number (a damaged record) counts as none: the next deployment is the first
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        given = self.model_fields_set | {"runner"}
        return {k: v for k, v in data.items() if k in given}


class LocalDeployment(_Deployment):
    """A spark-submit on one host: seen only from there (`host`), its launcher's `pid`."""

    runner: Literal["local"] = "local"
    host: str | None = None
    pid: int | None = None
    #: The application (`spark.application`) whose driver runs the flow's query; `pid` is then that driver's
    #: spark-submit and `folder` the flow's sub-folder of the application's folder. None: an application of its own.
    application: str | None = None


class StandaloneDeployment(_Deployment):
    """A driver on a Spark standalone cluster, submitted through its REST API."""

    runner: Literal["standalone"] = "standalone"
    submission_id: str | None = None
    rest_url: str | None = None
    master: str | None = None
    #: The URI of the job's Python environment archive, when kmirror shipped one (a folder on HDFS).
    job_environment: str | None = None
    #: The application (`spark.application`) whose driver runs the flow's query; `submission_id` is then that
    #: driver's and `folder` the flow's sub-folder of the application's folder. None: a driver of its own.
    application: str | None = None


class YarnDeployment(_Deployment):
    """A cluster-mode application on YARN; its folder is on HDFS."""

    runner: Literal["yarn"] = "yarn"
    application_id: str | None = None
    resource_manager: str | None = None
    hadoop_conf_dir: str | None = None
    #: The HDFS URI of the job's Python environment archive, when kmirror shipped one.
    job_environment: str | None = None


Deployment = LocalDeployment | StandaloneDeployment | YarnDeployment
RunnerKind = Literal["local", "standalone", "yarn"]

_Tagged = Annotated[LocalDeployment | StandaloneDeployment | YarnDeployment, Field(discriminator="runner")]
_DEPLOYMENT: TypeAdapter[Deployment] = TypeAdapter(_Tagged)  # type: ignore[arg-type, unused-ignore]  # Annotated union


def deployment_of(record: Mapping[str, object]) -> Deployment:
    """A recorded deployment (state topic or `runner.json`), migrated: one written before records named their
    runner is a standalone one when it has a submission id, else a local one."""
    if not isinstance(record.get("runner"), str):
        record = {**record, "runner": "standalone" if "submission_id" in record else "local"}
    return _DEPLOYMENT.validate_python(record)


def mark_stopped(deployment: Deployment, at: float) -> Deployment:
    """The same deployment, marked stopped at `at` (epoch seconds)."""
    return deployment.model_copy(update={"stopped_at": at})
