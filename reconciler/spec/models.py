"""The desired state as frozen pydantic models: what `kmirror.yaml` may say, with MM2's defaults.

`DesiredState` is the root. Every model is frozen and rejects unknown fields, so a typo is an error, not a
silently ignored setting. Field-level rules (types, ranges, formats) live here; rules that look across fields
or flows (cluster references, cycles, name collisions, regex portability) live in `validate.py`, which reports
them with file locations.

Strings holding `${env:..}`/`${file:..}` become `SecretRef`s (see `secrets.py`) and are dumped as written.

Pure: no I/O, no Kafka or Spark imports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from reconciler.core.policy.filters import flow_policy as _flow_policy
from reconciler.core.policy.filters import (
    group_matches,
    remote_topic,
    spark_remote_topic_expr,
    subscribe_pattern,
    topic_matcher,
    topic_matches,
)
from reconciler.core.policy.naming import ReplicationPolicy, template_problems
from reconciler.jobcontract.layout import checkpoint_root_problem
from reconciler.spec import defaults
from reconciler.spec.byte_rates import ByteRate
from reconciler.spec.durations import Duration
from reconciler.spec.intervals import interval_seconds, trigger_interval
from reconciler.spec.schema_registry import SchemaRegistrySpec
from reconciler.spec.secrets import ConfigValue
from reconciler.spec.start import StartFrom

if TYPE_CHECKING:
    from reconciler.spec.client_config import ClientConfig

TOPIC_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
ALIAS_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
FLOW_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"

ClusterAlias = Annotated[str, StringConstraints(pattern=ALIAS_PATTERN, max_length=100)]
#: `spark.application` / `flows[].spark.application`: named like a flow (it names a folder and a Spark app).
ApplicationName = Annotated[str, StringConstraints(pattern=FLOW_NAME_PATTERN, max_length=100)]
TopicName = Annotated[str, StringConstraints(pattern=TOPIC_NAME_PATTERN)]
ConfigMap = dict[str, ConfigValue]
RegexList = tuple[str, ...]


class SpecModel(BaseModel):
    """Base of every desired-state model: frozen, unknown fields refused, defaults validated."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class ClusterSpec(SpecModel):
    """A Kafka cluster: where to connect and the client properties (librdkafka/Java names) to connect with."""

    bootstrap_servers: str = Field(
        min_length=1,
        description="Comma-separated host:port list, e.g. 'localhost:9092,localhost:9093', or a list. May be "
        "${env:NAME} or ${file:PATH} (resolved at load) when it differs per environment.",
    )
    client: ConfigMap = Field(
        default_factory=dict,
        description="Client properties (security.protocol, sasl.mechanism, ...). Secrets as ${env:..}/${file:..}.",
    )
    description: str | None = Field(default=None, description="Free text for people; kmirror ignores it.")
    schema_registry: SchemaRegistrySpec | None = Field(
        default=None, description="The registry of this cluster's record schemas (for flows with sync.schemas)."
    )

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _join_list(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return ",".join(value)
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for server in value.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"{server.strip()!r} is not host:port")
        return value


class StateSpec(SpecModel):
    """Where kmirror records what it applied: a compacted topic on one of the declared clusters."""

    cluster: str = Field(description="Alias of the cluster that holds the state topic.")
    topic: TopicName = Field(
        default=defaults.DEFAULT_STATE_TOPIC,
        description="The compacted state topic (created by the first apply); one per desired-state file.",
    )


def _require_positive_whole(conf: Mapping[str, Any], key: str, must: str, meaning: str, example: str) -> None:
    """A Spark setting that must be a whole number above 0 when given; else a load error naming it."""
    value = conf.get(key)
    if value is not None and not (str(value).strip().isdigit() and int(str(value)) > 0):
        raise ValueError(f"conf {key} is {value!r}; it must be {must} above 0 ({meaning}), e.g. '{example}'")


class SparkSpec(SpecModel):
    """How the replication jobs run."""

    deploy: Literal["local", "standalone", "yarn", "none"] = Field(
        default="local",
        description="local: a detached spark-submit on this machine; standalone: a Spark standalone cluster; "
        "yarn: a cluster-mode application on a YARN ResourceManager (HADOOP_CONF_DIR or hadoop_conf_dir); "
        "none: kmirror runs no replication job (it manages topics, configs, ACLs and offsets only, e.g. while "
        "another tool such as MM2 copies the records).",
    )
    master: str | None = Field(
        default=None,
        description="spark://host:port for deploy=standalone; yarn (or left out) for deploy=yarn; for deploy=local, "
        "local[N], or left out: the job sizes "
        "local[N] itself, two task slots per real-time task (spark.kmirror.realtimeTasks, default 2; one per "
        "source partition when there are fewer); with local[N], a real-time task per slot unless "
        "spark.kmirror.realtimeTasks says fewer.",
    )
    rest_url: str | None = Field(
        default=None, description="Spark standalone REST submission server, e.g. http://host:6066."
    )
    rest_jws_secret_key: ConfigValue | None = Field(
        default=None,
        description="The key of a master whose REST submission server requires authentication (Spark's JWSFilter: "
        "spark.master.rest.filters=org.apache.spark.ui.JWSFilter with its param.secretKey): the same base64url "
        "key, as a reference (${env:..} or ${file:..}). kmirror signs a token valid for five minutes per request.",
    )
    checkpoint_root: str = Field(
        default=".kmirror/checkpoints",
        description="Where the jobs' Spark checkpoints (their read positions) live, under "
        "<state topic>@<state cluster id>/<flow>: a "
        "path or a URI (file:, hdfs:, s3a:, ...). With deploy 'standalone', an absolute path or file: URI on a "
        "filesystem every worker and every machine that runs kmirror mounts at the same path (the jobs' spec, "
        "status and log sit beside the checkpoints), or an hdfs: URI (with hadoop_conf_dir). An s3a: URI works with "
        "every deploy; with 'yarn' and 'standalone' the jobs' folders then go to job_folder_root. A relative path is "
        "taken from this file's folder (deploy 'local' only).",
    )
    hadoop_conf_dir: str | None = Field(
        default=None,
        description="deploy=yarn, or deploy=standalone with an hdfs: checkpoint_root: the Hadoop client "
        "configuration folder (core-site.xml, hdfs-site.xml, yarn-site.xml: the NameNode and, for yarn, the "
        "ResourceManager addresses); left out, $HADOOP_CONF_DIR. A relative path is taken from this file's folder.",
    )
    job_folder_root: str | None = Field(
        default=None,
        description="deploy=yarn or standalone with an object-store checkpoint_root (s3a:): where each job's folder "
        "(spec, status, runner record, stop request) lives instead, under <state topic>@<state cluster id>/<flow>, "
        "since kmirror reads and writes those files without S3 credentials: an hdfs: URI (read through WebHDFS), or "
        "for standalone also an absolute path shared by the workers and the machines running kmirror. Left out with "
        "deploy 'yarn': <fs.defaultFS>/user/<user>/kmirror on the cluster's HDFS (HADOOP_CONF_DIR); with deploy "
        "'standalone' it is required. Only the checkpoint goes to S3. See docs/checkpoint-storage.md.",
    )
    conf: ConfigMap = Field(default_factory=dict, description="Extra Spark configuration for every job.")
    application: ApplicationName | None = Field(
        default=None,
        description="Run every flow as one streaming query of the Spark application NAME (one driver for all; see "
        "docs/applications.md) instead of a Spark application per flow (the default). A flow's own "
        "spark.application overrides it. deploy 'local' or 'standalone' (not yet yarn).",
    )

    @model_validator(mode="after")
    def _master_matches_deploy(self) -> SparkSpec:
        if self.application is not None:
            problem = application_deploy_problem(self, "spark.application")
            if problem is not None:
                raise ValueError(problem)
        if self.deploy == "local" and self.master is not None and not self.master.startswith("local"):
            raise ValueError(f"deploy 'local' needs master 'local[N]' (or none: kmirror sizes it), got {self.master!r}")
        if self.deploy == "yarn" and self.master not in (None, "yarn"):
            raise ValueError(f"deploy 'yarn' needs master 'yarn' (or none), got {self.master!r}")
        if self.deploy == "standalone" and not (self.master or "").startswith("spark://"):
            raise ValueError(f"deploy 'standalone' needs master 'spark://host:7077', got {self.master!r}")
        problem = checkpoint_root_problem(self.checkpoint_root, self.deploy, self.job_folder_root)
        if problem is not None:
            raise ValueError(problem)
        mode = self.conf.get("spark.kmirror.mode")
        mode_name = None if mode is None else str(mode).strip().lower()
        if mode_name is not None and mode_name not in defaults.JOB_MODES:
            raise ValueError(
                f"conf spark.kmirror.mode is {mode!r}; use one of {', '.join(defaults.JOB_MODES)} "
                "(realtime needs a task slot per real-time task)"
            )
        _require_positive_whole(
            self.conf, "spark.kmirror.transactionIntervalMs", "a number of milliseconds",
            "how old an exactly-once flow's transaction gets before it is committed", "200",
        )  # fmt: skip
        _require_positive_whole(
            self.conf, defaults.REALTIME_TASKS_SETTING, "a whole number",
            "how many real-time tasks read the source partitions, each with one consumer", "8",
        )  # fmt: skip
        _require_positive_whole(
            self.conf, defaults.RESTART_BACKOFF_MAX_SETTING, "a number of milliseconds",
            "the longest wait before a failed query is restarted", "30000",
        )  # fmt: skip
        interval = self.conf.get("spark.kmirror.triggerInterval")
        if (
            mode_name == "realtime"
            and interval is not None
            and "spark.sql.streaming.realTimeMode.minBatchDuration" not in self.conf
        ):
            seconds = interval_seconds(trigger_interval(str(interval)))
            if seconds is not None and seconds < defaults.REALTIME_MIN_INTERVAL_SECONDS:
                raise ValueError(
                    f"conf spark.kmirror.triggerInterval is {interval!r}: in real-time mode it is the checkpoint "
                    f"interval, at least {defaults.REALTIME_MIN_INTERVAL_SECONDS:.0f} seconds "
                    "(Spark's spark.sql.streaming.realTimeMode.minBatchDuration); e.g. '10 seconds'"
                )
        return self


class TopicFilter(SpecModel):
    """Regexes that must match a whole topic name (MM2 semantics). An empty include list replicates nothing."""

    include: RegexList = Field(
        default=defaults.DEFAULT_TOPIC_INCLUDES,
        description="Source topics to replicate: regexes, each matching a whole name ('orders' is not 'orders2').",
    )
    exclude: RegexList = Field(
        default=defaults.DEFAULT_TOPIC_EXCLUDES,
        description="Replaces MM2's default list when set. Internal topics are never replicated anyway.",
    )


class GroupFilter(SpecModel):
    """Regexes that must match a whole consumer group id (MM2 semantics)."""

    include: RegexList = Field(
        default=defaults.DEFAULT_GROUP_INCLUDES, description="Consumer groups whose offsets are translated."
    )
    exclude: RegexList = Field(
        default=defaults.DEFAULT_GROUP_EXCLUDES, description="Groups never translated (MM2's default list)."
    )


class NamingSpec(SpecModel):
    """How remote topics are named: prefix (`<source><sep><topic>`, MM2's default), identity, or a template."""

    policy: Literal["prefix", "identity", "template"] = Field(
        default="prefix",
        description="prefix: '<source><separator><topic>', cycles detected (MM2's default); identity: the same "
        "name (migrations; cycles are a plan-time error); template: the `template` below.",
    )
    separator: Annotated[str, StringConstraints(pattern=r"^[._-]{1,5}$")] = Field(
        default=".", description="Between the source alias and the topic name (MM2's replication.policy.separator)."
    )
    template: str | None = Field(default=None, description="For policy 'template', e.g. 'mirror-{source}-{topic}'.")

    @model_validator(mode="after")
    def _template_only_with_template_policy(self) -> NamingSpec:
        if self.policy == "template":
            if self.template is None:
                raise ValueError("policy 'template' needs a template, e.g. template: '{source}.{topic}'")
            problems = template_problems(self.template)
            if problems:
                raise ValueError(f"template {self.template!r} " + "; ".join(problems))
        elif self.template is not None:
            raise ValueError(f"a template is only used with policy 'template' (policy is {self.policy!r})")
        return self


class TopicDefaults(SpecModel):
    """Settings for remote topics kmirror creates."""

    replication_factor: int = Field(default=-1, ge=-1, le=32767, description="-1 uses the broker's default.")
    configs: ConfigMap = Field(default_factory=dict, description="Topic configs set on every remote topic.")

    @field_validator("replication_factor")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("replication_factor 0 is not allowed (use -1 for the broker default, or 1 and up)")
        return value


class SyncSpec(SpecModel):
    """What besides records is kept in sync: topic configs, topic ACLs, consumer group offsets."""

    configs: bool = Field(
        default=True, description="Copy the source topic's explicitly set configs (never broker defaults)."
    )
    acls: bool = Field(
        default=True,
        description="Copy literal topic ACLs, MM2's rules: ALLOW WRITE skipped, ALLOW ALL becomes ALLOW READ.",
    )
    group_offsets: bool = Field(
        default=False,
        description="Write translated offsets into the target's __consumer_offsets (groups EMPTY there only).",
    )
    config_exclude: RegexList = Field(
        default=defaults.DEFAULT_CONFIG_EXCLUDES, description="Topic configs never copied (MM2's list)."
    )
    schemas: bool = Field(
        default=False,
        description="Register the replicated topics' key and value schemas (TopicNameStrategy subjects) in the "
        "target cluster's schema_registry, and translate the schema ids in records written with a Confluent "
        "serializer. Both clusters need a schema_registry.",
    )
    schema_subjects_exclude: RegexList = Field(
        default=(), description="Source subjects never synced (regexes matching a whole subject name)."
    )


class Delivery(StrEnum):
    """A flow's delivery guarantee: the values of `replication.delivery`, for code that reads a recorded spec
    (`ReplicationSpec.exactly_once` answers for a loaded one)."""

    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class ReplicationSpec(SpecModel):
    """How records are copied."""

    start_from: StartFrom = Field(
        default="earliest",
        description="Where a new flow starts reading each source partition, at its job's first start only (then "
        "its checkpoint decides): earliest, latest, an ISO 8601 timestamp with a timezone ('2026-11-01T00:00:00Z': "
        "the first record at or after it, Kafka's offsets-for-times; a partition with none starts at its end) or "
        "a duration ('7d': that far back from the job's first start). Partitions and topics that appear later "
        "start at their earliest offset.",
    )
    producer: ConfigMap = Field(default_factory=dict, description="Producer properties for the target.")
    consumer: ConfigMap = Field(default_factory=dict, description="Consumer properties for the source.")
    adopt_existing: bool = Field(
        default=False,
        description="Mirror into target topics that already exist but were not created by kmirror (migrations "
        "onto pre-created topics). Off: such a topic is a plan-time error.",
    )
    delivery: Literal["at_least_once", "exactly_once"] = Field(  # the values of `Delivery`, inline in the schema
        default="at_least_once",
        description="at_least_once: after a crash some records are written again (duplicates, never losses). "
        "exactly_once: records are written in Kafka transactions with the source position committed to the target "
        "in the same transaction, so `read_committed` consumers of the target see every record once (see "
        "docs/delivery.md for the cost, the group and transactional ids it creates and the ACLs they need). "
        "Changing it redeploys the job, which restarts from its checkpoint.",
    )
    throttle: ByteRate | None = Field(
        default=None,
        description="The most bytes per second this flow's job may read from the source and write to the target "
        "(e.g. '10MB', 1000-based; '20MiB', 1024-based; a number alone is bytes), enforced by Kafka client quotas "
        "on the job's own client ids (`consumer_byte_rate` on the source, `producer_byte_rate` on the target), "
        "planned as `quota/<cluster>/<client-id>`; Kafka enforces a quota on each broker, so each is the throttle "
        "divided by its cluster's brokers. The job fetches a tenth of a second of it per request, so that the "
        "source's quota paces it evenly. Changing its value only alters the quotas (the job's fetch size follows at "
        "its next start); setting or removing it also redeploys the job once (from its checkpoint), so that its "
        "clients take or drop those ids.",
    )

    @property
    def exactly_once(self) -> bool:
        return self.delivery == Delivery.EXACTLY_ONCE.value


OLD_SYNCS_LOCATION = "offset_syncs_location"


class OffsetsSpec(SpecModel):
    """Offset syncs and checkpoints (MM2's offset.lag.max, emit.checkpoints.*, offset-syncs.topic.location)."""

    offset_lag_max: int = Field(
        default=defaults.MM2_OFFSET_LAG_MAX,
        ge=0,
        description="An offset sync is written at least every this many records per partition (MM2's offset.lag.max).",
    )
    emit_checkpoints: bool = Field(
        default=True, description="Write `<source>.checkpoints.internal` on the target (MM2's emit.checkpoints)."
    )
    checkpoint_interval: Duration = Field(
        default=timedelta(seconds=defaults.MM2_CHECKPOINT_INTERVAL_SECONDS),
        description="How often group offsets are translated: the most a translated offset can lag at cutover.",
    )
    syncs_location: Literal["source", "target"] = Field(
        default="source",
        description="Cluster of the `mm2-offset-syncs.<other>.internal` topic (MM2's offset-syncs.topic.location). "
        "With replication.delivery exactly_once and 'target', the offset-syncs are written in the same transactions "
        "as the records. `offset_syncs_location` is accepted as an older name for it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _older_name(cls, data: Any) -> Any:
        """`offset_syncs_location` (kmirror's first name for it) is read as `syncs_location`; both is an error."""
        if isinstance(data, dict) and OLD_SYNCS_LOCATION in data:
            if "syncs_location" in data:
                raise ValueError(
                    f"both syncs_location and {OLD_SYNCS_LOCATION} (its older name) are set; keep only syncs_location"
                )
            data = {("syncs_location" if k == OLD_SYNCS_LOCATION else k): v for k, v in data.items()}
        return data

    @property
    def offset_syncs_location(self) -> Literal["source", "target"]:
        """The older name of `syncs_location`, for code written against it."""
        return self.syncs_location

    @field_validator("checkpoint_interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("checkpoint_interval must be longer than 0s")
        return value


class HeartbeatsSpec(SpecModel):
    """Heartbeats emitted into the source and replicated, proving the whole path works."""

    enabled: bool = Field(default=True, description="Emit heartbeats into the source's `heartbeats` topic.")
    interval: Duration = Field(
        default=timedelta(seconds=defaults.MM2_HEARTBEAT_INTERVAL_SECONDS),
        description="How often (MM2's emit.heartbeats.interval.seconds).",
    )

    @field_validator("interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("interval must be longer than 0s")
        return value


def application_deploy_problem(spark: SparkSpec, where: str) -> str | None:
    """Why `spark` cannot run flows as queries of one application (`where`: the key that asks), or None.

    Deploy 'local' keeps the application's folder on this host; 'standalone' keeps it beside the jobs' folders (a
    shared path the driver reads, or HDFS, which the driver mirrors into its working folder). YARN: not yet.
    """
    if spark.deploy in ("local", "standalone"):
        return None
    return (
        f"{where} needs deploy 'local' or 'standalone' for now (deploy {spark.deploy!r} runs one Spark "
        f"application per flow): remove {where}, or use deploy 'local' or 'standalone'"
    )


class FlowSparkSpec(SpecModel):
    """A flow's own Spark placement: which application its query runs in."""

    application: ApplicationName | None = Field(
        default=None,
        description="The Spark application this flow's query runs in, with the other flows naming it (overrides "
        "spark.application): flows can be split into groups, one driver per group.",
    )


class FlowSpec(SpecModel):
    """One replication flow: records, configs, ACLs and offsets from `source` to `target`."""

    name: Annotated[str, StringConstraints(pattern=FLOW_NAME_PATTERN, max_length=100)] = Field(
        description="Unique; names the flow's job (`job/<name>`) and its Spark checkpoint folder."
    )
    source: str = Field(description="Alias of the cluster records are read from.")
    target: str = Field(description="Alias of the cluster remote topics are written to.")
    enabled: bool = Field(
        default=True, description="false keeps the flow in the file but plans nothing for it (its job is stopped)."
    )
    topics: TopicFilter = Field(default_factory=TopicFilter)
    groups: GroupFilter = Field(default_factory=GroupFilter)
    naming: NamingSpec = Field(default_factory=NamingSpec)
    topic_defaults: TopicDefaults = Field(default_factory=TopicDefaults)
    sync: SyncSpec = Field(default_factory=SyncSpec)
    replication: ReplicationSpec = Field(default_factory=ReplicationSpec)
    offsets: OffsetsSpec = Field(default_factory=OffsetsSpec)
    heartbeats: HeartbeatsSpec = Field(default_factory=HeartbeatsSpec)
    spark: FlowSparkSpec | None = Field(
        default=None, description="The flow's Spark placement: `{application: NAME}` (see spark.application)."
    )

    # -- naming and filtering, all delegated to reconciler.core.policy --------------------------------------------
    def policy(self) -> ReplicationPolicy:
        return _flow_policy(self)

    def remote_topic(self, topic: str) -> str:
        return remote_topic(self, topic)

    def topic_matches(self, topic: str) -> bool:
        return topic_matches(self, topic)

    def topic_matcher(self) -> Callable[[str], bool]:
        """`topic_matches` with the filter and policy looked up once, for deciding thousands of topics."""
        return topic_matcher(self)

    def group_matches(self, group: str) -> bool:
        return group_matches(self, group)

    def subscribe_pattern(self) -> str:
        return subscribe_pattern(self)

    def spark_remote_topic_expr(self, column: str = "topic") -> str:
        return spark_remote_topic_expr(self, column)

    # -- the flow's topic rules, computed here once for the planner, the control plane and the job ---------------
    def remote_topics(self, source_topics: Iterable[str]) -> dict[str, str]:
        """Source topic -> remote topic name, for every source topic the flow replicates (heartbeats included)."""
        matches, policy = self.topic_matcher(), self.policy()
        result = {t: policy.remote_topic(self.source, t) for t in source_topics if matches(t)}
        heartbeats = policy.heartbeats_topic()
        if self.heartbeats.enabled and heartbeats not in result and matches(heartbeats):
            result[heartbeats] = policy.remote_topic(self.source, heartbeats)  # made by the internal-topic change
        return result

    def synced_configs(self, source_configs: Mapping[str, str]) -> dict[str, str]:
        """The source's explicit configs that MM2's config sync copies, then the flow's own topic configs on top."""
        configs: dict[str, str] = {}
        if self.sync.configs:
            excluded = self.config_exclusion()
            configs = {k: v for k, v in source_configs.items() if not excluded(k)}
        configs.update({k: str(v) for k, v in self.topic_defaults.configs.items()})
        return configs

    def config_exclusion(self) -> Callable[[str], bool]:
        """Whether a config name is one the flow never syncs (`sync.config_exclude`), decided once per name."""
        return _excluded_by(tuple(self.sync.config_exclude))

    def syncs_location(self) -> tuple[str, str]:
        """(cluster alias, topic) of the flow's offset-syncs (MM2's offset-syncs.topic.location)."""
        policy = self.policy()
        if self.offsets.syncs_location == "source":
            return self.source, policy.offset_syncs_topic(self.target)
        return self.target, policy.offset_syncs_topic(self.source)


@functools.lru_cache(maxsize=64)
def _excluded_by(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    # Compiled once per exclusion list, not once per topic (re's own cache lookups took 0.2 s for 10,000 topics),
    # and decided once per config name: thousands of topics share a few dozen names.
    compiled = [re.compile(p) for p in patterns]

    @functools.lru_cache(maxsize=4096)
    def excluded(key: str) -> bool:
        return any(p.fullmatch(key) for p in compiled)

    return excluded


class MovedSpec(SpecModel):
    """A flow that was renamed (Terraform's `moved` block): its job keeps its position instead of starting over."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, populate_by_name=True)

    from_: Annotated[str, StringConstraints(pattern=FLOW_NAME_PATTERN, max_length=100)] = Field(
        alias="from", description="The flow's old name, as the state topic recorded it."
    )
    to: Annotated[str, StringConstraints(pattern=FLOW_NAME_PATTERN, max_length=100)] = Field(
        description="The flow's new name: a flow of this file. Apply stops the old job gracefully and starts the "
        "renamed one on the old one's checkpoint; keep the entry until every environment has applied it."
    )


class PruneSpec(SpecModel):
    """Which kinds kmirror may delete when they leave the desired state. Deletes are opt-in per kind."""

    topics: bool = Field(default=False, description="Delete remote topics kmirror created whose source is gone.")
    acls: bool = Field(default=False, description="Delete ACLs kmirror created that are no longer wanted.")
    schemas: bool = Field(
        default=False, description="Delete target subjects kmirror registered whose source subject is gone."
    )
    jobs: bool = Field(default=True, description="Stop the job of a flow that was removed or disabled.")


class DesiredState(SpecModel):
    """The whole `kmirror.yaml`."""

    version: Literal[1] = Field(description="Format version of this file; 1.")
    clusters: dict[ClusterAlias, ClusterSpec] = Field(min_length=1)
    state: StateSpec
    spark: SparkSpec = Field(default_factory=SparkSpec)
    flows: tuple[FlowSpec, ...] = ()
    prune: PruneSpec = Field(default_factory=PruneSpec)
    moved: tuple[MovedSpec, ...] = Field(
        default=(), description="Flows that were renamed: `{from: old-name, to: new-name}` (see MovedSpec)."
    )

    _source_path: Path | None = PrivateAttr(default=None)

    @field_validator("flows")
    @classmethod
    def _one_heartbeats_flow_per_pair(cls, flows: tuple[FlowSpec, ...]) -> tuple[FlowSpec, ...]:
        """MM2 emits and mirrors a cluster pair's heartbeats once, whatever flows the pair is split into: here the
        first enabled flow of a (source, target) pair, by name, with heartbeats on does it for the pair, and the
        pair's other flows run with heartbeats off (as if set so), so six flows of one pair need no hand-tuning."""
        owners: dict[tuple[str, str], str] = {}
        for flow in sorted(flows, key=lambda f: f.name):
            if flow.enabled and flow.heartbeats.enabled:
                owners.setdefault((flow.source, flow.target), flow.name)
        return tuple(
            flow
            if not flow.heartbeats.enabled or owners.get((flow.source, flow.target), flow.name) == flow.name
            else flow.model_copy(update={"heartbeats": flow.heartbeats.model_copy(update={"enabled": False})})
            for flow in flows
        )

    @field_validator("flows")
    @classmethod
    def _applications_need_their_runner(cls, flows: tuple[FlowSpec, ...], info: ValidationInfo) -> tuple[FlowSpec, ...]:
        spark = info.data.get("spark")
        if not isinstance(spark, SparkSpec):
            return flows
        for flow in flows:
            if flow.spark is not None and flow.spark.application is not None:
                problem = application_deploy_problem(spark, f"flows[{flow.name}].spark.application")
                if problem is not None:
                    raise ValueError(problem)
        return flows

    def application_of(self, flow: FlowSpec) -> str | None:
        """The Spark application `flow`'s query runs in (its own, else `spark.application`); None: its own app."""
        own = flow.spark.application if flow.spark is not None else None
        return own or self.spark.application

    @property
    def source_path(self) -> Path | None:
        """The file this state was loaded from, if any (relative `${file:..}` paths resolve against its folder)."""
        return self._source_path

    @property
    def base_dir(self) -> Path | None:
        return None if self._source_path is None else self._source_path.parent

    def with_source_path(self, path: Path) -> DesiredState:
        copy = self.model_copy()
        copy._source_path = path
        return copy

    def flow(self, name: str) -> FlowSpec:
        """The flow called `name`; KeyError if there is none."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise KeyError(name)

    @property
    def enabled_flows(self) -> tuple[FlowSpec, ...]:
        return tuple(f for f in self.flows if f.enabled)

    def flow_effective_spec(self, name: str) -> dict[str, Any]:
        from reconciler.spec.digest import flow_effective_spec

        return flow_effective_spec(self, name)

    def flow_digest(self, name: str) -> str:
        from reconciler.spec.digest import flow_digest

        return flow_digest(self, name)

    def spec_digest(self) -> str:
        from reconciler.spec.digest import spec_digest

        return spec_digest(self)

    def client_config(self, cluster: str) -> ClientConfig:
        from reconciler.spec.client_config import kafka_client_config

        return kafka_client_config(self.clusters[cluster], alias=cluster, base_dir=self.base_dir)
