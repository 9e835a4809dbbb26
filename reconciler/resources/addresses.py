"""Resource kinds and their addresses, as Terraform's `internal/addrs`: one type per kind, printed once by
`str()`, parsed once by `parse_address`. A plan, the state topic and the CLI's `--target` carry the printed
form (`topic/<cluster>/<name>`, `job/<flow>`, ...); code that needs a part reads the typed field instead of
splitting the string.

Printed forms: `topic/<cluster>/<topic>`, `internal_topic/<cluster>/<topic>`,
`acl/<cluster>/<principal>/<operation>/<topic>`, `job/<flow>`, `group_offsets/<cluster>/<group>`,
`quota/<cluster>/<client-id>`, `schema/<cluster>/<subject>`. Cluster aliases, flow names, topic names and operations
hold no `/`; a group id, a principal, a client id or a subject may, so they are parsed as the remainder.

Must not: import anything of kmirror but `reconciler.errors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.errors import KmirrorError


class Kind(StrEnum):
    TOPIC = "topic"
    INTERNAL_TOPIC = "internal_topic"
    ACL = "acl"
    JOB = "job"
    GROUP_OFFSETS = "group_offsets"
    QUOTA = "quota"
    SCHEMA = "schema"


class AddressError(KmirrorError):
    """A resource address that does not parse (from a `--target`, a plan file or a state record)."""


@dataclass(frozen=True)
class TopicAddress:
    cluster: str
    name: str
    kind = Kind.TOPIC

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.name}"


@dataclass(frozen=True)
class InternalTopicAddress:
    cluster: str
    name: str
    kind = Kind.INTERNAL_TOPIC

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.name}"


@dataclass(frozen=True)
class AclAddress:
    cluster: str
    principal: str
    operation: str
    topic: str
    kind = Kind.ACL

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.principal}/{self.operation}/{self.topic}"


@dataclass(frozen=True)
class JobAddress:
    flow: str
    kind = Kind.JOB

    @property
    def cluster(self) -> None:
        return None

    def __str__(self) -> str:
        return f"{self.kind}/{self.flow}"


@dataclass(frozen=True)
class GroupOffsetsAddress:
    cluster: str
    group: str
    kind = Kind.GROUP_OFFSETS

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.group}"


@dataclass(frozen=True)
class QuotaAddress:
    cluster: str
    client_id: str
    kind = Kind.QUOTA

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.client_id}"


@dataclass(frozen=True)
class SchemaAddress:
    cluster: str
    subject: str
    kind = Kind.SCHEMA

    def __str__(self) -> str:
        return f"{self.kind}/{self.cluster}/{self.subject}"


Address = (
    TopicAddress | InternalTopicAddress | AclAddress | JobAddress | GroupOffsetsAddress | QuotaAddress | SchemaAddress
)

_FORMS = {
    Kind.TOPIC: "topic/<cluster>/<topic>",
    Kind.INTERNAL_TOPIC: "internal_topic/<cluster>/<topic>",
    Kind.ACL: "acl/<cluster>/<principal>/<operation>/<topic>",
    Kind.JOB: "job/<flow>",
    Kind.GROUP_OFFSETS: "group_offsets/<cluster>/<group>",
    Kind.QUOTA: "quota/<cluster>/<client-id>",
    Kind.SCHEMA: "schema/<cluster>/<subject>",
}


def parse_address(text: str) -> Address:
    """The typed address of `text`; an `AddressError` naming the expected form when it is not one."""
    head, _, rest = text.partition("/")
    try:
        kind = Kind(head)
    except ValueError:
        kinds = ", ".join(k.value for k in Kind)
        raise AddressError(f"'{text}' is not a resource address: it must start with one of {kinds}") from None
    parts = rest.split("/")
    if not rest or any(not p for p in parts[:1]):
        raise AddressError(f"'{text}' is not a valid {kind} address: the form is {_FORMS[kind]}")
    address = _build(kind, rest, parts)
    if address is None:
        raise AddressError(f"'{text}' is not a valid {kind} address: the form is {_FORMS[kind]}")
    return address


def _build(kind: Kind, rest: str, parts: list[str]) -> Address | None:
    if kind == Kind.JOB:
        return JobAddress(rest) if len(parts) == 1 else None
    if len(parts) < 2 or not parts[1]:
        return None
    cluster, remainder = parts[0], rest[len(parts[0]) + 1 :]
    if kind in (Kind.TOPIC, Kind.INTERNAL_TOPIC):
        if len(parts) != 2:
            return None
        return TopicAddress(cluster, remainder) if kind == Kind.TOPIC else InternalTopicAddress(cluster, remainder)
    if kind == Kind.GROUP_OFFSETS:
        return GroupOffsetsAddress(cluster, remainder)
    if kind == Kind.QUOTA:
        return QuotaAddress(cluster, remainder)
    if kind == Kind.SCHEMA:
        return SchemaAddress(cluster, remainder)
    if len(parts) < 4 or not parts[-1] or not parts[-2]:  # acl: the principal may hold a '/'
        return None
    return AclAddress(cluster, "/".join(parts[1:-2]), parts[-2], parts[-1])


def job_flow(address: str) -> str:
    """The flow of a `job/<flow>` address; an `AddressError` for any other address."""
    parsed = parse_address(address)
    if not isinstance(parsed, JobAddress):
        raise AddressError(f"'{address}' is not a job address: the form is {_FORMS[Kind.JOB]}")
    return parsed.flow


def topic_address(cluster: str, name: str) -> str:
    return str(TopicAddress(cluster, name))


def internal_topic_address(cluster: str, name: str) -> str:
    return str(InternalTopicAddress(cluster, name))


def acl_address(cluster: str, principal: str, operation: str, topic: str) -> str:
    return str(AclAddress(cluster, principal, operation, topic))


def job_address(flow: str) -> str:
    return str(JobAddress(flow))


def group_offsets_address(cluster: str, group: str) -> str:
    return str(GroupOffsetsAddress(cluster, group))


def quota_address(cluster: str, client_id: str) -> str:
    return str(QuotaAddress(cluster, client_id))


def schema_address(cluster: str, subject: str) -> str:
    return str(SchemaAddress(cluster, subject))
