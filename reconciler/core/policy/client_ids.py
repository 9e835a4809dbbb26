"""The client ids of a flow's replication job: `kmirror.<state topic>.<flow>.source` and `.target`.

A Kafka client quota names the clients it throttles by client id, so the job's clients need ids that are stable
(the same after every redeploy) and the flow's own (one flow's throttle must not slow another flow, nor two
deployments that share clusters but not a state topic). The job gives every client that fetches the flow's
records from the source (Spark's Kafka source, real-time or micro-batch) the `.source` id, and every producer
that writes them to the target (Spark's Kafka sink, the exactly-once writer's transactional producers) the
`.target` id; the planner names the same ids in `quota/<cluster>/<client-id>`. Many clients sharing one id is
what a quota wants: the broker throttles their sum. State topic and flow names only hold `[A-Za-z0-9._-]`, which
every Kafka version takes in a client id and in a quota entity name.

The job gives its clients these ids only when the flow is throttled: the flow's effective spec then carries them
(`client_ids`, see `spec.digest`), so an unthrottled flow's clients keep Kafka's own ids (and many clients of one
executor sharing an id make the Kafka client log a warning for each: a cost only a throttled flow pays). A
`client.id` the flow sets itself (`replication.consumer` / `replication.producer`) wins over these in the job, and
the quota names it instead (`FlowSpec`-level code passes it as `override`).

Pure: no I/O, no Kafka or Spark imports. Must not: depend on anything a redeploy changes (a run id, a generation,
a host), or the quota would stop matching the job's clients.
"""

from __future__ import annotations

from typing import Literal

Side = Literal["source", "target"]


def job_client_id(state_topic: str, flow: str, side: Side, override: object = None) -> str:
    """`kmirror.<state topic>.<flow>.<side>`, or `override` when the flow set its own `client.id` (a plain string)."""
    if isinstance(override, str) and override:
        return override
    return f"kmirror.{state_topic}.{flow}.{side}"


def flow_client_ids(
    state_topic: str, flow: str, consumer_id: object = None, producer_id: object = None
) -> dict[str, str]:
    """`{"source": ..., "target": ...}`: the ids of the flow's fetching and producing clients (`job_client_id`), where
    `consumer_id`/`producer_id` are the `client.id` the flow's own consumer/producer settings give, if any."""
    return {
        "source": job_client_id(state_topic, flow, "source", consumer_id),
        "target": job_client_id(state_topic, flow, "target", producer_id),
    }
