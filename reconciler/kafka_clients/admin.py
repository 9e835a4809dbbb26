"""The one adapter that owns every AdminClient call kmirror makes.

Each method is batched (one request for many resources, never one per topic), passes a request timeout, and
either returns plain values (reads) or a per-resource `Outcome` (writes) instead of stopping at the first
failure. "Already there" answers (TOPIC_ALREADY_EXISTS and friends) count as success, so re-running an
action that already took effect is a no-op. A cluster that does not answer raises `ClusterUnreachableError`
naming it. `round_trips` counts requests, for the plan-scale benchmark.

Bulk reads (topic metadata, describe-configs) pause Python's cyclic garbage collector while the client turns
the answer into Python objects: see `_gc_paused`.

Client quotas (a flow's throttle) go through Kafka's own Java Admin client instead, because confluent-kafka has no
KIP-546 call: one short `java` process per batch, the cluster's Java client properties on its stdin
(`adapters.client_quotas`), started only when a quota is read or set.

Consumer group offsets (their reads and writes) go through librdkafka's C API instead (`exact_offsets`), so that
their metadata strings are read and written exactly as committed; confluent-kafka's calls garble them.

Must not: shell out to Kafka's tools (kafka-configs.sh), put a client property on a command line, or send one request
per resource where the protocol takes many.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from reconciler.artifacts.quota_tool import quota_tool_command
from reconciler.errors import ClusterUnreachableError, KmirrorError
from reconciler.kafka_clients import client_quotas, exact_offsets
from reconciler.kafka_clients.client_quotas import ClientQuotaError, CommandFactory
from reconciler.kafka_clients.exact_offsets import CommittedOffset, ExactOffsets
from reconciler.live.model import AclEntry, GroupInfo
from reconciler.spec.client_config import ClientConfig

T = TypeVar("T")

#: Broker answers that mean "what you asked for is already the case".
_ALREADY_DONE = {
    KafkaError.TOPIC_ALREADY_EXISTS,
    KafkaError.INVALID_PARTITIONS,  # checked against the current count below: equal means already grown
}
_TRANSIENT = {
    KafkaError._TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_CONTROLLER,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError._TRANSPORT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.CONCURRENT_TRANSACTIONS,
    KafkaError._ALL_BROKERS_DOWN,
}
_CONFIG_CHUNK = 1000
#: A topic config counts as set when its source is the topic itself (an int or the enum, by client version).
_EXPLICIT = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


@dataclass(frozen=True)
class Outcome:
    """The result of one write on one resource."""

    key: str
    ok: bool
    message: str = ""
    transient: bool = False
    already_done: bool = False


@dataclass(frozen=True)
class TopicMeta:
    name: str
    partitions: int
    replication_factor: int


class KafkaAdmin:
    """Admin operations on one cluster, named for error messages."""

    def __init__(
        self,
        cluster: str,
        config: ClientConfig,
        timeout: float = 30.0,
        *,
        java_properties: Callable[[], Mapping[str, str]] | None = None,
        quota_tool: CommandFactory | None = None,
    ) -> None:
        """`java_properties` gives the same cluster's Java client properties (secrets resolved) when a client quota
        is read or set, never before; without it only a plain `config` (bootstrap servers, security protocol) can be
        used for quotas. `quota_tool` builds the quota tool's command line (default: compiled on first use)."""
        self.cluster = cluster
        self.bootstrap = str(config.get("bootstrap.servers", "?"))
        self._java_properties = java_properties or _plain_java_properties(cluster, config)
        self._quota_tool = quota_tool
        self.timeout = timeout
        self.round_trips = 0
        self.brokers: int | None = None
        self._broker_ids: tuple[int, ...] = ()
        self._admin = AdminClient({**config, "log_level": 0, "logger": _SilentLogger()})
        #: Group offsets with their metadata exactly as committed (see `exact_offsets`); None where it cannot be
        #: used, and then metadata read through confluent-kafka is unknown (it may carry bytes read past its end).
        self._exact = ExactOffsets(config, timeout) if exact_offsets.available(config) else None

    # -- reads ------------------------------------------------------------------------------------------------
    def topics(self) -> dict[str, TopicMeta]:
        """Every topic with its partition count and replication factor (one metadata request)."""
        self.round_trips += 1
        result = {}
        with _gc_paused():  # the client's answer is ~4 Python objects per topic and partition
            try:
                metadata = self._admin.list_topics(timeout=self.timeout)
            except KafkaException as exc:
                raise self._unreachable(exc) from exc
            self.brokers = len(metadata.brokers)
            self._broker_ids = tuple(metadata.brokers)
            for name, topic in metadata.topics.items():
                if topic.error is not None and not topic.partitions:
                    continue
                replicas = max((len(p.replicas) for p in topic.partitions.values()), default=0)
                result[name] = TopicMeta(name, len(topic.partitions), replicas)
            del metadata  # freed here, while collections are paused, not walked by the next one
        return result

    def wait_visible(self, names: Iterable[str], stall: float = 60.0, limit: float = 900.0) -> set[str]:
        """Wait until the topics appear in the cluster's metadata; returns those still missing when it gives up.

        After a burst of creates the broker's metadata trails the create answers: the controller has committed
        the topics, but a broker publishes them only after it has applied the metadata before them (creating
        the logs of every earlier topic), which for thousands of topics on a busy broker takes minutes. A plan
        made in that window sees the new topics as missing. So the wait lasts as long as topics keep
        appearing: it gives up only after `stall` seconds in which no missing topic appeared, or after `limit`.
        """
        missing = set(names)
        started = progress_at = time.monotonic()
        pause = 0.25
        while missing:
            visible = missing & set(self.topics())
            now = time.monotonic()
            if visible:
                missing -= visible
                progress_at = now
            if not missing or now - progress_at > stall or now - started > limit:
                break
            time.sleep(pause)
            pause = min(pause * 2, 2.0)  # a metadata request for thousands of topics is not free
        return missing

    def exist_on_controller(self, names: Iterable[str]) -> set[str]:
        """Which of `names` the controller knows as topics, whatever the brokers' metadata shows yet.

        Asked with a validate-only create (nothing is created): the controller answers TOPIC_ALREADY_EXISTS for
        a topic it has committed. Any other answer (created-if-asked, not authorized, timeout) counts as "not
        known to exist".
        """
        wanted = sorted(set(names))
        outcomes = self.create_topics([(n, 1, -1, {}) for n in wanted], validate_only=True)
        return {o.key for o in outcomes if o.ok and o.already_done}

    def confirm_created(self, names: Iterable[str]) -> dict[str, bool | None]:
        """Per name: True when the controller has the topic, False when it has not, None when it did not say.

        For a create whose answer was lost (a timeout): asked with a validate-only create, which the controller
        answers TOPIC_ALREADY_EXISTS for a committed topic and with success for an absent one.
        """
        wanted = sorted(set(names))
        result: dict[str, bool | None] = {}
        for o in self.create_topics([(n, 1, -1, {}) for n in wanted], validate_only=True):
            result[o.key] = True if o.ok and o.already_done else False if o.ok else None
        return result

    def explicit_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Configs set explicitly on each topic (source DYNAMIC_TOPIC_CONFIG); broker defaults never count."""
        names = sorted(set(topics))
        result: dict[str, dict[str, str]] = {}
        # The client builds ~36 ConfigEntry objects (and their synonyms) per topic: 700,000 for 10,000 topics. Each
        # request's answers are dropped once read, so none of them is left for the collector when it resumes.
        with _gc_paused():
            requests: list[dict[Any, Future[Any]]] = []
            for i in range(0, len(names), _CONFIG_CHUNK):
                self.round_trips += 1
                chunk = [ConfigResource(ResourceType.TOPIC, n) for n in names[i : i + _CONFIG_CHUNK]]
                requests.append(self._admin.describe_configs(chunk, request_timeout=self.timeout))
            requests.reverse()  # popped in order, each dropped (with its answers) once read
            while requests:
                for resource, future in requests.pop().items():
                    try:
                        entries: dict[str, ConfigEntry] = self._wait(future)
                    except KafkaException as exc:
                        if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                            continue  # deleted between listing and describing
                        raise
                    result[resource.name] = {
                        k: e.value for k, e in entries.items() if e.source in _EXPLICIT and e.value is not None
                    }
        return result

    def has_authorizer(self) -> bool | None:
        """Whether a broker runs with `authorizer.class.name` set; None when its configs cannot be read.

        Needed because a broker without an authorizer answers DescribeAcls with an empty list through
        librdkafka, which would read as "no ACLs" and let a plan look complete when ACL sync cannot work.
        """
        try:
            brokers = self._broker_ids
            if not brokers:  # not listed yet by topics(); its list spares a metadata request for every topic
                self.round_trips += 1
                brokers = tuple(self._admin.list_topics(timeout=self.timeout).brokers)
            self.round_trips += 1
            resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
            entries = self._wait(self._admin.describe_configs([resource], request_timeout=self.timeout)[resource])
        except (KafkaException, ValueError):
            return None
        entry = entries.get("authorizer.class.name")
        return bool(entry is not None and entry.value)

    def acls(self) -> tuple[AclEntry, ...] | None:
        """Every ACL binding; None when the cluster has no authorizer (SECURITY_DISABLED)."""
        if self.has_authorizer() is False:
            return None
        self.round_trips += 1
        acl_filter = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
        try:
            bindings: list[AclBinding] = self._wait(self._admin.describe_acls(acl_filter, request_timeout=self.timeout))
        except KafkaException as exc:
            if exc.args[0].code() in (KafkaError.SECURITY_DISABLED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
                return None
            raise
        return tuple(sorted(_acl_entry(b) for b in bindings))

    def groups(self, wanted: Any = None) -> dict[str, GroupInfo]:
        """Consumer groups (those `wanted(group_id)` accepts) with their state and committed offsets."""
        return self.read_groups(wanted)[0]

    def read_groups(self, wanted: Any = None) -> tuple[dict[str, GroupInfo], str | None]:
        """`groups`, and why the listing is incomplete (None when every broker answered).

        ListConsumerGroups asks every broker; one that does not answer leaves its groups out of the listing, so
        a group missing from an incomplete listing may well exist: never treat it as absent (writing offsets into
        it could move it backwards).
        """
        self.round_trips += 1
        listing = self._wait(self._admin.list_consumer_groups(request_timeout=self.timeout))
        incomplete = "; ".join(str(e) for e in listing.errors or ()) or None
        chosen = [g for g in listing.valid if wanted is None or wanted(g.group_id)]
        futures = self._group_offsets([g.group_id for g in chosen])
        result = {}
        for g in chosen:
            offsets, metadata = self._wait(futures[g.group_id])
            state = g.state.name if g.state is not None else "UNKNOWN"
            result[g.group_id] = GroupInfo(g.group_id, state, offsets, metadata)
        return result, incomplete

    def _exact_path(self) -> ExactOffsets | None:
        """The exact group-offsets client, when this cluster's configuration lets librdkafka's C client run."""
        return self._exact if self._exact is not None and self._exact.usable() else None

    def _group_offsets(self, groups: Sequence[str]) -> dict[str, Future[_Committed]]:
        """Each group's committed offsets and their metadata (the non-empty ones), one request a group (the
        protocol takes one), all in flight at once.

        Through `exact_offsets` when it can be used: the metadata exactly as committed; metadata that is not UTF-8
        (not from a Java client) is left out, as unknown. Otherwise through confluent-kafka, whose metadata may carry
        bytes read past its end (`exact_offsets` says why): all of it is left out, as unknown, never copied.
        """
        self.round_trips += len(groups)
        out: dict[str, Future[_Committed]] = {}
        if (exact := self._exact_path()) is not None:
            for group, future in exact.list_group_offsets(groups).items():
                out[group] = _then(future, _exact_committed)
            return out
        requests = [ConsumerGroupTopicPartitions(g) for g in groups]
        futures: dict[str, Future[Any]] = {}
        for request in requests:
            futures.update(self._admin.list_consumer_group_offsets([request], request_timeout=self.timeout))
        for group in groups:
            out[group] = _then(
                futures[group],
                lambda r: ({(tp.topic, tp.partition): tp.offset for tp in r.topic_partitions if tp.offset >= 0}, {}),
            )
        return out

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._list_offsets(partitions, OffsetSpec.latest())

    def start_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def topic_ids(self, names: Iterable[str]) -> dict[str, str]:
        """The topic id of each named topic that exists (KIP-516): it changes when a topic is deleted and created
        again under the same name. Topics that do not exist (any more) are left out."""
        wanted = sorted(set(names))
        if not wanted:
            return {}
        self.round_trips += 1
        futures = self._admin.describe_topics(TopicCollection(wanted), request_timeout=self.timeout)
        out = {}
        for name, future in futures.items():
            try:
                out[name] = str(future.result(timeout=self.timeout + 5).topic_id)
            except Exception:  # gone, not yet in metadata, or no answer in time: asked again next time
                continue
        return out

    def _list_offsets(self, partitions: Iterable[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        self.round_trips += 1
        futures = self._admin.list_offsets(request, request_timeout=self.timeout)
        return {(tp.topic, tp.partition): self._wait(f).offset for tp, f in futures.items()}

    # -- writes (each returns one Outcome per resource) -------------------------------------------------------
    def create_topics(
        self, topics: Sequence[tuple[str, int, int, Mapping[str, str]]], validate_only: bool = False
    ) -> list[Outcome]:
        """Create (name, partitions, replication_factor, configs); an existing topic is a success.

        `validate_only`: the broker checks the request and creates nothing (the plan's preflight).
        """
        if not topics:
            return []
        futures: dict[str, Future[Any]] = {}
        # Each topic costs the controller one record, one per partition and one per config.
        for chunk in _by_partitions(topics, lambda t: 1 + max(t[1], 1) + len(t[3])):
            self.round_trips += 1
            new = [NewTopic(n, num_partitions=p, replication_factor=rf, config=dict(c)) for n, p, rf, c in chunk]
            futures.update(
                self._admin.create_topics(
                    new, request_timeout=self.timeout, operation_timeout=self.timeout, validate_only=validate_only
                )
            )
        return [self._outcome(name, futures[name]) for name, *_ in topics]

    def create_partitions(self, increases: Mapping[str, int]) -> list[Outcome]:
        """Grow each topic to the given total partition count; a topic already that large is a success."""
        if not increases:
            return []
        futures: dict[str, Future[Any]] = {}
        for chunk in _by_partitions(list(increases.items()), lambda item: item[1]):
            self.round_trips += 1
            futures.update(
                self._admin.create_partitions([NewPartitions(t, n) for t, n in chunk], request_timeout=self.timeout)
            )
        outcomes = [self._outcome(t, futures[t]) for t in increases]
        if any(not o.ok and "INVALID_PARTITIONS" in o.message for o in outcomes):
            current = self.topics()
            outcomes = [
                Outcome(o.key, True, "already has the partitions", already_done=True)
                if not o.ok and o.key in current and current[o.key].partitions >= increases[o.key]
                else o
                for o in outcomes
            ]
        return outcomes

    def alter_topic_configs(
        self, changes: Mapping[str, tuple[Mapping[str, str], Iterable[str]]], validate_only: bool = False
    ) -> list[Outcome]:
        """Incremental alter configs: per topic, (configs to SET, config names to DELETE). Never a full alter."""
        if not changes:
            return []
        resources = []
        for topic, (to_set, to_delete) in changes.items():
            entries = [
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(to_set.items())
            ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in sorted(to_delete)]
            resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries))
        self.round_trips += 1
        futures = self._admin.incremental_alter_configs(
            resources, request_timeout=self.timeout, validate_only=validate_only
        )
        return [self._outcome(r.name, futures[r]) for r in resources]

    def delete_topic(self, name: str) -> Outcome:
        """Delete one topic (deletes are opt-in and irreversible, so never batched); a missing one is a success."""
        self.round_trips += 1
        futures = self._admin.delete_topics([name], request_timeout=self.timeout, operation_timeout=self.timeout)
        outcome = self._outcome(name, futures[name])
        if not outcome.ok and "UNKNOWN_TOPIC_OR_PART" in outcome.message:
            return Outcome(name, True, "already gone", already_done=True)
        return outcome

    def delete_group(self, group: str) -> Outcome:
        """Delete one consumer group and its committed offsets; a missing one is a success."""
        self.round_trips += 1
        futures = self._admin.delete_consumer_groups([group], request_timeout=self.timeout)
        outcome = self._outcome(group, futures[group])
        if not outcome.ok and "GROUP_ID_NOT_FOUND" in outcome.message:
            return Outcome(group, True, "already gone", already_done=True)
        return outcome

    def create_acls(self, entries: Sequence[AclEntry]) -> list[Outcome]:
        if not entries:
            return []
        self.round_trips += 1
        bindings = [_acl_binding(e) for e in entries]
        futures = self._admin.create_acls(bindings, request_timeout=self.timeout)
        return [self._outcome(_acl_key(e), futures[b]) for e, b in zip(entries, bindings, strict=True)]

    def delete_acls(self, entries: Sequence[AclEntry]) -> list[Outcome]:
        """Delete exactly these bindings (each filter matches one binding: every field is given)."""
        if not entries:
            return []
        self.round_trips += 1
        filters = [_acl_binding(e, as_filter=True) for e in entries]
        futures = self._admin.delete_acls(filters, request_timeout=self.timeout)
        return [self._outcome(_acl_key(e), futures[f]) for e, f in zip(entries, filters, strict=True)]

    def alter_group_offsets(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> Outcome:
        """Commit `offsets` for `group`, each with its metadata string from `metadata` ("" when not given).

        Through `exact_offsets` when it can be used: the metadata goes on the wire as its UTF-8 bytes, as a Java
        client or MirrorMaker 2 writes it. Otherwise through confluent-kafka, without metadata: it would send one
        byte more, a NUL, that a Java reader sees at the end of the string (Kafka Streams base64-decodes its commit
        metadata); such a cluster's own reads leave metadata out too (`_group_offsets`; docs/mm2-users.md).
        """
        self.round_trips += 1
        if (exact := self._exact_path()) is not None:
            encoded = {tp: m.encode() for tp, m in (metadata or {}).items() if m}
            return self._outcome(group, exact.alter_group_offsets(group, offsets, encoded))
        partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        request = ConsumerGroupTopicPartitions(group, partitions)
        futures = self._admin.alter_consumer_group_offsets([request], request_timeout=self.timeout)
        return self._outcome(group, futures[group])

    # -- client quotas (KIP-546, through Kafka's Java Admin client) -------------------------------------------
    def describe_client_quotas(self, client_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        """Per client id, the quotas set on it alone (`consumer_byte_rate`...); ids without any are left out.

        One describeClientQuotas call for all of them. Raises `ClientQuotaError` when they could not be read (no
        Java or Kafka client jars: the message says what to install; a failed call: what the cluster said).
        """
        ids = sorted(set(client_ids))
        if not ids:
            return {}
        self.round_trips += 1
        answer = self._run_quota_tool(lambda props: client_quotas.describe_request(props, ids, self.timeout))
        try:
            return {cid: q for cid, q in client_quotas.decode_describe(answer).items() if cid in ids}
        except ClientQuotaError as exc:
            raise ClientQuotaError(f"cluster '{self.cluster}': {exc}", transient=exc.transient) from None

    def alter_client_quotas(self, alterations: Mapping[str, Mapping[str, float | None]]) -> list[Outcome]:
        """Per client id, quota name -> bytes per second to set, or None to remove it; one Outcome per client id.

        All in one alterClientQuotas call. When the tool cannot run (Java or the jars are missing), each id fails
        (not transient) with what to install; when the cluster did not answer, each fails as transient.
        """
        if not alterations:
            return []
        self.round_trips += 1
        try:
            answer = self._run_quota_tool(lambda props: client_quotas.alter_request(props, alterations, self.timeout))
        except ClientQuotaError as exc:
            return [Outcome(cid, False, str(exc), transient=exc.transient) for cid in alterations]
        return [
            Outcome(r.client_id, r.ok, r.error, transient=r.transient)
            for r in client_quotas.decode_alter(answer, alterations)
        ]

    def _run_quota_tool(self, request: Callable[[Mapping[str, str]], bytes]) -> client_quotas.ToolAnswer:
        """The quota tool's answer to the request built from this cluster's Java client properties (resolved here,
        held in memory only); raises `ClientQuotaError` (naming this cluster) when there is none."""
        try:
            command = (self._quota_tool or quota_tool_command)()
            return client_quotas.run_tool(command, request(self._java_properties()), self.timeout)
        except ClientQuotaError as exc:
            raise ClientQuotaError(f"cluster '{self.cluster}': {exc}", transient=exc.transient) from None
        except KmirrorError as exc:  # no Java or jars (ArtifactError), a secret that cannot be resolved
            raise ClientQuotaError(f"cluster '{self.cluster}': {exc}") from None

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _wait(self, future: Future[T]) -> T:
        try:
            return future.result(timeout=self.timeout + 5)
        except TimeoutError as exc:
            raise self._unreachable(exc) from exc
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                raise self._unreachable(exc) from exc
            raise

    def _outcome(self, key: str, future: Future[Any]) -> Outcome:
        try:
            future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is None:
                return Outcome(key, False, str(exc))
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return Outcome(key, True, err.str(), already_done=True)
            return Outcome(key, False, f"{err.name()}: {err.str()}", transient=err.code() in _TRANSIENT)
        except TimeoutError:
            return Outcome(key, False, f"no answer from {self.cluster} within {self.timeout:.0f}s", transient=True)
        return Outcome(key, True)

    def _unreachable(self, exc: BaseException) -> KmirrorError:
        return unreachable(self.cluster, self.bootstrap, self.timeout, exc)


_Committed = tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]
U = TypeVar("U")


def _then(future: Future[T], convert: Callable[[T], U]) -> Future[U]:
    """A future of `convert(future's result)`; the same exception when `future` failed."""
    out: Future[U] = Future()

    def done(f: Future[T]) -> None:
        try:
            out.set_result(convert(f.result()))
        except BaseException as exc:  # handed on to whoever waits for `out`
            out.set_exception(exc)

    future.add_done_callback(done)
    return out


def _exact_committed(committed: Mapping[tuple[str, int], CommittedOffset]) -> _Committed:
    """Offsets (the committed ones) and their non-empty metadata strings; metadata that is not UTF-8 is unknown."""
    offsets, metadata = {}, {}
    for tp, c in committed.items():
        if c.offset < 0:
            continue
        offsets[tp] = c.offset
        if c.metadata:
            try:
                metadata[tp] = c.metadata.decode("utf-8")
            except UnicodeDecodeError:
                continue
    return offsets, metadata


#: librdkafka keys whose value means the same to Java's client: a config of only these needs no translation.
_PLAIN_KEYS = frozenset({"bootstrap.servers", "security.protocol", "client.id"})


def _plain_java_properties(cluster: str, config: ClientConfig) -> Callable[[], Mapping[str, str]]:
    """Java client properties taken from a librdkafka `config` when it holds nothing to translate (no TLS, no SASL)."""

    def properties() -> Mapping[str, str]:
        other = sorted(k for k in config if k not in _PLAIN_KEYS and k not in ("log_level", "logger"))
        if other:
            raise ClientQuotaError(
                f"cluster '{cluster}': client quotas need the cluster's Java client properties, and this admin was "
                f"given only a librdkafka configuration with {', '.join(other)}"
            )
        return {k: str(v) for k, v in config.items() if k in _PLAIN_KEYS}

    return properties


def unreachable(cluster: str, bootstrap: str, timeout: float, exc: BaseException) -> KmirrorError:
    """The error for a cluster that did not answer, for the admin here and the other clients kmirror opens."""
    return ClusterUnreachableError(
        f"cluster '{cluster}' ({bootstrap}) did not answer within {timeout:.0f}s: {exc}. "
        "Check its bootstrap_servers and client settings in the desired-state file, and that it is up.",
        cluster=cluster,
    )


#: Weight (partitions, or metadata records) per CreateTopics/CreatePartitions request. Kafka 4.x's controller
#: refuses a request above 10,000 partitions ("Excessively large number of partitions per request") or one
#: operation above 10,000 metadata records ("Unable to perform excessively large batch operation"): a topic is
#: one record, plus one per partition and one per config. Chunks well below that are sent all at once.
PARTITIONS_PER_REQUEST = 4000


def _by_partitions(items: Sequence[T], partitions: Callable[[T], int]) -> list[list[T]]:
    """Split `items` into requests of at most PARTITIONS_PER_REQUEST partitions (a larger topic goes alone)."""
    chunks: list[list[T]] = [[]]
    size = 0
    for item in items:
        n = partitions(item)
        if chunks[-1] and size + n > PARTITIONS_PER_REQUEST:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += n
    return chunks


class _GcPause:
    """Pauses Python's cyclic garbage collector while any thread holds it; re-enables it (if it was on) after the last.

    A bulk answer becomes hundreds of thousands of short-lived Python objects, built by the client's background
    thread; each allocation burst triggers collections that walk every object still alive, which took ~40% of
    a 10,000-topic describe-configs (2.2 s instead of 3.7 s without). Those objects hold no reference cycles,
    so nothing is left for the collector to find; it runs as usual once the read is done.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._was_enabled:
                    gc.enable()


_gc_paused = _GcPause()


class _SilentLogger:
    """librdkafka logs connection failures to stderr by default; kmirror reports them as errors instead."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        return None


def _acl_entry(b: AclBinding) -> AclEntry:
    return AclEntry(
        resource_type=b.restype.name,
        pattern_type=b.resource_pattern_type.name,
        resource_name=b.name,
        principal=b.principal,
        host=b.host,
        operation=b.operation.name,
        permission="ALLOW" if b.permission_type == AclPermissionType.ALLOW else "DENY",
    )


def _acl_binding(e: AclEntry, as_filter: bool = False) -> Any:
    cls = AclBindingFilter if as_filter else AclBinding
    return cls(
        ResourceType[e.resource_type],
        e.resource_name,
        ResourcePatternType[e.pattern_type],
        e.principal,
        e.host,
        AclOperation[e.operation],
        AclPermissionType[e.permission],
    )


def _acl_key(e: AclEntry) -> str:
    return f"{e.principal}/{e.operation}/{e.permission}/{e.host}/{e.resource_type}:{e.resource_name}"
