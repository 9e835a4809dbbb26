"""What kmirror recorded in its state topic: the last-applied form of each managed resource, by address.

Read from the state topic by the state store and handed to the planner as a plain value, so the planner can be
tested with hand-built ones.

Must not: import anything of kmirror but the resource addresses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RecordedResource:
    """The last-applied form of one managed resource (a change's `after`, as applied)."""

    address: str
    kind: str
    attributes: Mapping[str, Any]
    #: Recorded before the call that creates it, by an apply that did not get to confirm it (it was killed).
    pending: bool = False


@dataclass(frozen=True)
class RecordedState:
    lineage: str | None = None
    serial: int = 0
    resources: Mapping[str, RecordedResource] = field(default_factory=dict)
    #: The Kafka cluster id of the state's cluster, when read from it: job folders and checkpoints are keyed by it
    #: (`jobcontract.layout.state_key`).
    cluster_id: str | None = None

    def owns(self, address: str) -> bool:
        return address in self.resources

    def pending(self, address: str) -> bool:
        r = self.resources.get(address)
        return r is not None and r.pending

    def get(self, address: str) -> Mapping[str, Any] | None:
        r = self.resources.get(address)
        return r.attributes if r else None

    def of_kind(self, kind: str) -> list[RecordedResource]:
        return [r for r in self.resources.values() if r.kind == kind]
