"""The report of `kmirror verify`: per source partition, what was checked and found; a verdict; its renderings.

`VerifyReport.to_json()` is the contract (docs/operations.md, "kmirror verify"): `{"ok", "flow", "partitions":
[{"topic", "partition", "ok", "checked", "missing", "duplicated", "reordered", "different", "unverifiable",
"first_bad_source_offsets", ...}], "summary": {...}}`; text and markdown are computed from the same values.
`exit_code` is the command's: 0 every checked record matches, 1 a mismatch or an error, 2 (with
`--detailed-exitcode`) nothing wrong but some records unverifiable.

Must not: import a Kafka or Spark client, do I/O, or carry record content (only offsets, counts and digests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.verify.compare import PartitionTally

__all__ = ["COUNTS", "PartitionRange", "VerifyReport"]

COUNTS = ("checked", "missing", "duplicated", "reordered", "different", "unexpected", "unverifiable")


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """The range a partition was verified over: source [start, end), the remote partition up to `target_end`."""

    source_start: int
    source_end: int
    target_end: int


@dataclass
class VerifyReport:
    flow: str
    source: str
    target: str
    selection: str  # "everything on the source", "since 2026-11-27T08:00:00Z", "the last 1000 records"
    sample: float = 1.0
    partitions: list[tuple[PartitionTally, PartitionRange | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(t.ok for t, _ in self.partitions)

    def total(self, name: str) -> int:
        return sum(int(getattr(t, name)) for t, _ in self.partitions)

    @property
    def complete(self) -> bool:
        """Nothing was unverifiable (and nothing failed)."""
        return self.ok and self.total("unverifiable") == 0

    def verdict(self) -> str:
        checked = self.total("checked")
        sampled = f" (sample {self.sample:g})" if self.sample < 1 else ""
        if not self.ok:
            bad = [f"{self.total(n)} {n}" for n in COUNTS[1:-1] if self.total(n)]
            errors = sum(1 for t, _ in self.partitions if t.error)
            if errors:
                bad.append(f"{errors} partition(s) not read")
            return f"MISMATCH: {', '.join(bad)} among {checked} record(s) checked{sampled}"
        unverifiable = self.total("unverifiable")
        if unverifiable:
            return f"match, incomplete: {checked} record(s) checked{sampled} match; {unverifiable} unverifiable"
        return f"match: all {checked} record(s) checked{sampled} match"

    def exit_code(self, detailed: bool = False) -> int:
        if not self.ok:
            return 1
        if detailed and self.total("unverifiable"):
            return 2
        return 0

    # -- renderings ---------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        parts = []
        for t, r in self.partitions:
            entry: dict[str, Any] = {"topic": t.topic, "partition": t.partition, "remote_topic": t.remote_topic}
            entry["ok"] = t.ok
            entry.update({n: int(getattr(t, n)) for n in COUNTS})
            entry["first_bad_source_offsets"] = list(t.first_bad_source_offsets)
            entry["first_bad_target_offsets"] = list(t.first_bad_target_offsets)
            entry["differences"] = [d.to_json() for d in t.differences]
            entry["reasons"] = dict(sorted(t.reasons.items()))
            entry["range"] = (
                None
                if r is None
                else {"source_start": r.source_start, "source_end": r.source_end, "target_end": r.target_end}
            )
            entry["error"] = t.error
            parts.append(entry)
        summary: dict[str, Any] = {n: self.total(n) for n in COUNTS}
        summary.update(
            partitions=len(self.partitions),
            partitions_ok=sum(1 for t, _ in self.partitions if t.ok),
            complete=self.complete,
            verdict=self.verdict(),
            seconds=round(self.seconds, 3),
        )
        return {
            "ok": self.ok,
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "selection": self.selection,
            "sample": self.sample,
            "partitions": parts,
            "notes": list(self.notes),
            "summary": summary,
        }

    def to_text(self) -> str:
        lines = [f"Verify of flow {self.flow} ({self.source} -> {self.target}), {self.selection}:"]
        for t, r in self.partitions:
            where = f"{t.topic}/{t.partition}"
            span = "" if r is None else f" [{r.source_start}, {r.source_end})"
            if t.error:
                lines.append(f"  {where}: ERROR {t.error}")
                continue
            counts = ", ".join(f"{getattr(t, n)} {n}" for n in COUNTS[1:] if getattr(t, n))
            state = "ok" if t.ok else "MISMATCH"
            lines.append(f"  {where}{span}: {state}, {t.checked} checked{', ' + counts if counts else ''}")
            if t.first_bad_source_offsets:
                lines.append(f"    first bad source offsets: {', '.join(map(str, t.first_bad_source_offsets))}")
            if t.first_bad_target_offsets:
                lines.append(f"    first bad target offsets: {', '.join(map(str, t.first_bad_target_offsets))}")
            for d in t.differences:
                lines.append(
                    f"    source {d.source_offset} / target {d.target_offset}: {d.field} differs "
                    f"(digest {d.source_digest} vs {d.target_digest})"
                )
            for reason, n in sorted(t.reasons.items()):
                lines.append(f"    {n} {reason}")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(f"{self.verdict()} ({len(self.partitions)} partition(s), {self.seconds:.1f}s)")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        icon = "✅" if self.complete else ("⚠️" if self.ok else "❌")
        lines = [
            f"### {icon} kmirror verify: flow `{self.flow}` (`{self.source}` → `{self.target}`)",
            "",
            f"**{self.verdict()}**, {self.selection}.",
            "",
            "| partition | ok | " + " | ".join(COUNTS) + " | first bad source offsets |",
            "|---|---|" + "---:|" * len(COUNTS) + "---|",
        ]
        for t, _ in self.partitions:
            first = ", ".join(map(str, t.first_bad_source_offsets)) or ("error: " + t.error if t.error else "")
            cells = " | ".join(str(getattr(t, n)) for n in COUNTS)
            lines.append(f"| `{t.topic}/{t.partition}` | {'yes' if t.ok else '**no**'} | {cells} | {first} |")
        if self.notes:
            lines += ["", *[f"- {n}" for n in self.notes]]
        return "\n".join(lines)
