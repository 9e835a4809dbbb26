"""Where a replication application (`spark.application: NAME`: several flows' queries in one Spark driver) keeps
its files, and the request a runner leaves for each of its flows.

The local runner keeps an application's folder beside its flows' own job folders (`application_folder`:
`<jobs dir>/_apps/<NAME>/`; `_` starts no flow name, so it never meets a flow's folder):

    runner.json         written by the runner: host, pid of the spark-submit process, the application's digest
                        (its Spark settings and jars: a change redeploys the whole application)
    status.json         written by the driver: state, pid, app id, the flows it runs
    driver.log          the driver's stdout and stderr, every flow's lines
    <flow>/             one sub-folder per flow (`JobFolder`): spec.json, request.json (`FlowRequest`),
                        status.json (the flow's own `JobReport`, as a job of its own writes it), stop.request

Must not: create, read or delete anything but these files' names and the request's JSON; hold a resolved secret.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from reconciler.jobcontract.layout import JobFolder

#: The sub-folder of a state topic's jobs folder that holds its applications.
APPLICATIONS = "_apps"


@dataclass(frozen=True)
class FlowRequest:
    """What the runner asks of one flow in an application: run `digest` (its spec.json) on `checkpoint`, in the
    driver started with `application_digest` (the application's Spark settings and jars the flow's spec runs with;
    a driver started with other ones leaves the flow to its own deploy, which redeploys the application: None, a
    request written before requests named it, runs in any)."""

    flow: str
    folder: JobFolder
    digest: str
    checkpoint: str
    resume_from_syncs: bool = False
    application_digest: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "flow": self.flow,
            "digest": self.digest,
            "checkpoint": self.checkpoint,
            "resume_from_syncs": self.resume_from_syncs,
            **({"application_digest": self.application_digest} if self.application_digest else {}),
        }

    def write(self) -> None:
        """Atomically, owner-only (the driver polls the folder and must never read half a request)."""
        path = request_path(self.folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(self.to_json(), out, indent=2, sort_keys=True)
        tmp.replace(path)

    @classmethod
    def read(cls, folder: JobFolder) -> FlowRequest | None:
        """The flow's request, or None when there is none, it cannot be read, or a stop request is there."""
        if folder.stop.exists():
            return None
        try:
            data = json.loads(request_path(folder).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        flow, digest, checkpoint = data.get("flow"), data.get("digest"), data.get("checkpoint")
        if not (isinstance(flow, str) and isinstance(digest, str) and isinstance(checkpoint, str)):
            return None
        application = data.get("application_digest")
        return cls(
            flow,
            folder,
            digest,
            checkpoint,
            data.get("resume_from_syncs") is True,
            application if isinstance(application, str) else None,
        )

    def runs_in(self, application_digest: str | None) -> bool:
        """Whether a driver started with `application_digest` runs this flow (None, either side: any driver)."""
        return None in (self.application_digest, application_digest) or self.application_digest == application_digest


def request_path(folder: JobFolder) -> Path:
    return folder.path / "request.json"


@dataclass(frozen=True)
class ApplicationFolder:
    """The files of one application and of its flows."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def runner(self) -> Path:
        return self.path / "runner.json"

    @property
    def status(self) -> Path:
        return self.path / "status.json"

    @property
    def log(self) -> Path:
        return self.path / "driver.log"

    def flow(self, flow: str) -> JobFolder:
        return JobFolder(self.path / flow)

    def flows(self) -> list[str]:
        """The flows that have a sub-folder here (requested, stopped or stopping)."""
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and (p / "spec.json").is_file())

    def requests(self) -> dict[str, FlowRequest]:
        """The flows the application is asked to run: a request and no stop request."""
        found = {}
        for name in self.flows():
            request = FlowRequest.read(self.flow(name))
            if request is not None and request.flow == name:
                found[name] = request
        return found


def application_folder(jobs_dir: Path, application: str) -> ApplicationFolder:
    """The folder of `application` among a state topic's local jobs (`jobs_dir`, the runner's)."""
    return ApplicationFolder(jobs_dir / APPLICATIONS / application)
