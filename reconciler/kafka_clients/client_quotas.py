"""Kafka client quotas (KIP-546) through Kafka's own Java Admin client, for the Kafka admin adapter.

librdkafka, the client kmirror's CLI uses, has no client-quota admin call, so the adapter hands each batch to a small
Java program (`reconciler/kafka_clients/jvm/ClientQuotas.java`, built by `reconciler.artifacts.quota_tool`): one process
per batch, ONE JSON request on its stdin (the cluster's Java client properties, secrets included, and the operation),
ONE JSON answer on its stdout (per-client-id results, or one error for the whole call). This module encodes the
request, runs the process with a timeout and decodes the answer into plain values and per-client-id `Outcome`s.

Secrets resolved in memory go to the process's stdin only: never on its command line, in a file or in a log; any text
the process prints is scrubbed (`spec.redaction`) before it reaches an error message.

Must not: put a property value on a command line, in a file, a log or an error; start Java unless asked to (only a
flow with a throttle, or a quota kmirror recorded, leads here).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypedDict, cast

from reconciler.errors import KmirrorError
from reconciler.spec.redaction import scrub

#: Seconds a JVM takes to start and load the Admin client, added to the request timeout.
JVM_START_BUDGET = 30.0


class ClientQuotaError(KmirrorError):
    """Client quotas could not be read or set on a cluster (the tool is missing, or the whole call failed)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        self.transient = transient
        super().__init__(message)


@dataclass(frozen=True)
class QuotaResult:
    """One client id's alter result, as the tool reported it."""

    client_id: str
    ok: bool
    error: str = ""
    transient: bool = False


class DescribeBody(TypedDict):
    op: Literal["describe"]
    client_ids: list[str]


class AlterBody(TypedDict):
    op: Literal["alter"]
    #: Per client id, quota name -> value to set, or None to remove it.
    alterations: dict[str, dict[str, float | None]]


class AlterResultDoc(TypedDict, total=False):
    ok: bool
    error: str
    transient: bool


class ToolAnswer(TypedDict, total=False):
    """The tool's one JSON answer: `quotas` (describe) or `results` (alter) per client id, or one `error` for the
    whole call. Read defensively: a field may be missing or of another type when the tool breaks."""

    error: str
    transient: bool
    quotas: dict[str, dict[str, float]]
    results: dict[str, AlterResultDoc]


def describe_request(properties: Mapping[str, str], client_ids: Iterable[str], timeout: float) -> bytes:
    """The tool's request to read the quotas set on `client_ids` (an entity of the client id alone)."""
    body: DescribeBody = {"op": "describe", "client_ids": sorted(set(client_ids))}
    return _request(properties, timeout, body)


def alter_request(
    properties: Mapping[str, str], alterations: Mapping[str, Mapping[str, float | None]], timeout: float
) -> bytes:
    """The tool's request to set (a number) or remove (None) quotas per client id, all in one alterClientQuotas call."""
    ops = {cid: {k: None if v is None else float(v) for k, v in r.items()} for cid, r in alterations.items()}
    body: AlterBody = {"op": "alter", "alterations": ops}
    return _request(properties, timeout, body)


def _request(properties: Mapping[str, str], timeout: float, body: DescribeBody | AlterBody) -> bytes:
    props = {str(k): str(v) for k, v in properties.items()}
    return json.dumps({"properties": props, "timeout_ms": int(timeout * 1000), **body}).encode()


def decode_describe(answer: ToolAnswer) -> dict[str, dict[str, float]]:
    """Per client id, its quotas (name -> value); raises `ClientQuotaError` when the tool reported the call failed."""
    _raise_on_error(answer)
    quotas = answer.get("quotas")
    if not isinstance(quotas, dict):
        raise ClientQuotaError("the client-quota tool's answer has no quotas")
    return {
        str(cid): {str(k): float(v) for k, v in values.items() if isinstance(v, int | float)}
        for cid, values in quotas.items()
        if isinstance(values, dict)
    }


def decode_alter(answer: ToolAnswer, client_ids: Iterable[str]) -> list[QuotaResult]:
    """One result per requested client id, in the order asked: the tool's, or a failure when it did not answer it.

    A failure of the whole call (the cluster did not answer, the client could not be built) fails every id with it.
    """
    ids = list(client_ids)
    if "error" in answer:
        error, transient = str(answer["error"]), bool(answer.get("transient"))
        return [QuotaResult(cid, False, error, transient) for cid in ids]
    results = answer.get("results") if isinstance(answer.get("results"), dict) else {}
    out = []
    for cid in ids:
        r = results.get(cid) if isinstance(results, dict) else None
        if not isinstance(r, dict):
            out.append(QuotaResult(cid, False, "the client-quota tool gave no result for this client id"))
        elif r.get("ok") is True:
            out.append(QuotaResult(cid, True))
        else:
            out.append(QuotaResult(cid, False, str(r.get("error", "failed")), bool(r.get("transient"))))
    return out


def parse_answer(stdout: str) -> ToolAnswer:
    """The tool's one JSON answer (its last non-empty line of stdout)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise ClientQuotaError(f"the client-quota tool gave no answer: {scrub(stdout[-500:])!r}")
    return cast(ToolAnswer, answer)  # a JSON object: its fields are checked where they are read


def run_tool(command: list[str], request: bytes, timeout: float) -> ToolAnswer:
    """Run the tool once with `request` on stdin; its answer. Raises `ClientQuotaError` when it gave none."""
    try:
        result = subprocess.run(command, input=request, capture_output=True, timeout=timeout + JVM_START_BUDGET)
    except subprocess.TimeoutExpired:
        raise ClientQuotaError(
            f"the client-quota tool did not finish within {timeout + JVM_START_BUDGET:.0f}s", transient=True
        ) from None
    except OSError as exc:
        raise ClientQuotaError(f"could not start Java for the client-quota tool: {exc}") from None
    stdout = result.stdout.decode("utf-8", errors="replace")
    if not stdout.strip():
        stderr = scrub(result.stderr.decode("utf-8", errors="replace"))
        tail = "\n".join(line for line in stderr.splitlines() if not line.startswith("SLF4J"))[-800:]
        raise ClientQuotaError(f"the client-quota tool exited with {result.returncode} and no answer: {tail}")
    answer = parse_answer(stdout)
    if "error" in answer:
        answer = {**answer, "error": scrub(str(answer["error"]))}
    return answer


def _raise_on_error(answer: ToolAnswer) -> None:
    if "error" in answer:
        raise ClientQuotaError(str(answer["error"]), transient=bool(answer.get("transient")))


#: Builds the tool's command line (`reconciler.artifacts.quota_tool.quota_tool_command`): injected for tests.
CommandFactory = Callable[[], list[str]]
