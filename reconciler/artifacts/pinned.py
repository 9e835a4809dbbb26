"""Fetching a jar set from its committed lock: each jar downloaded as it was pinned, in parallel, not resolved.

Resolving a set is what makes a first fetch slow: Apache Ivy reads about a thousand poms, checksums and folders
one request after another (kafka-3.9.2: 95 s). A lock (`jvm/locks/<set>.json`, written by `make lock`, i.e.
`python -m reconciler.artifacts.lock`, from what Maven resolved) already holds the answer: every jar's Maven
coordinates, the file name the set's folder gives it, and its SHA-256. So a fetch is one GET per jar, `WORKERS`
at a time over connections kept open, each checked against its SHA-256 (kafka-3.9.2, 105 jars, 57 MB: under a
second). A lock also records a fingerprint of the pom profiles it was made from (`fingerprint`); the caller
treats a lock whose fingerprint differs from the pom's as stale and resolves.

The jars come from Maven Central (`https://repo1.maven.org/maven2`), or from the Maven repository whose base URL
is in `$KMIRROR_MAVEN_REPOSITORY` (a mirror's `.../maven2`, or a `file://` folder in the same layout). A proxy in
`https_proxy` (and `no_proxy`) is honoured.

Must not: resolve anything (no Maven, no Ivy), read anything but the lock it is given, or write anywhere but the
folder it is given (the caller renames that into place, or deletes it when this raises).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reconciler.artifacts.ivy import ivy_module

#: The base URL of the Maven repository the jars come from (default: Maven Central).
REPOSITORY_ENV = "KMIRROR_MAVEN_REPOSITORY"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
#: Parallel downloads: each request waits ~25 ms on Central, so a set's hundred jars need several at once.
WORKERS = 8
_ATTEMPTS = 3
_BACKOFF_S = 1.0  # before the 2nd attempt; 2 s before the 3rd
_TIMEOUT_S = 30.0  # to connect, and between two reads
_CHUNK = 1 << 20
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.jar$")
_HEADERS = {"User-Agent": "kmirror (python http.client)"}
_REDIRECTS = (301, 302, 303, 307, 308)


class LockError(Exception):
    """A lock is unreadable, or a locked jar could not be fetched as locked (the message says what to do)."""


@dataclass(frozen=True)
class LockedJar:
    """One jar of a set: its coordinates, its file name in the set's folder, its SHA-256 (hex)."""

    group: str
    artifact: str
    version: str
    classifier: str  # "" when it has none
    file: str  # `<artifact>-<version>[-<classifier>].jar`, as `mvn dependency:copy-dependencies` names it
    sha256: str

    def url(self, repository: str) -> str:
        path = "/".join([*self.group.split("."), self.artifact, self.version, self.file])
        return f"{repository.rstrip('/')}/{path}"


@dataclass(frozen=True)
class Lock:
    """The jars of the set `name` (pom profiles `profiles` with `properties`), and what the lock was made from."""

    name: str
    profiles: tuple[str, ...]
    properties: Mapping[str, str]
    fingerprint: str
    jars: tuple[LockedJar, ...]


def fingerprint(pom_text: str, profiles: Sequence[str], properties: Mapping[str, str]) -> str:
    """What a set is resolved from: the dependencies and exclusions of its profiles, versions filled in."""
    return "sha256:" + hashlib.sha256(ivy_module(pom_text, profiles, properties).encode()).hexdigest()


def repository() -> str:
    """The Maven repository's base URL: `$KMIRROR_MAVEN_REPOSITORY`, else Maven Central."""
    return (os.environ.get(REPOSITORY_ENV, "").strip() or MAVEN_CENTRAL).rstrip("/")


def read_lock(path: Path) -> Lock:
    """The lock in `path`."""
    try:
        data = json.loads(path.read_text())
        lock = Lock(
            name=data["set"],
            profiles=tuple(data["profiles"]),
            properties=dict(data["properties"]),
            fingerprint=data["fingerprint"],
            jars=tuple(LockedJar(**jar) for jar in data["jars"]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise LockError(f"the jar lock {path} is unreadable ({e}): regenerate it with `make lock`") from None
    bad = [jar.file for jar in lock.jars if not _FILE.match(jar.file)]
    if bad:
        raise LockError(f"the jar lock {path} names files that are not plain jar names: {bad}; run `make lock`")
    return lock


def render_lock(lock: Lock) -> str:
    """The lock as JSON, one jar a line (sorted by file name), so a change reads as a diff of the jars."""
    head = {
        "set": lock.name,
        "profiles": list(lock.profiles),
        "properties": dict(lock.properties),
        "fingerprint": lock.fingerprint,
        "made_by": "make lock (python -m reconciler.artifacts.lock): Maven's dependency:copy-dependencies",
    }
    lines = ["{", *(f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()), '  "jars": [']
    jars = sorted(lock.jars, key=lambda jar: jar.file)
    lines += [f"    {json.dumps(jar.__dict__)}{',' if i < len(jars) - 1 else ''}" for i, jar in enumerate(jars)]
    return "\n".join([*lines, "  ]", "}", ""])


def fetch(lock: Lock, folder: Path, repository: str) -> None:
    """Download every jar of `lock` into `folder`, `WORKERS` at a time, each checked against its SHA-256.

    The first failure is raised (as `LockError`) once the downloads still running have stopped; the rest are
    not started. `folder` then holds partial files: the caller deletes it.
    """
    stop = threading.Event()
    with (
        contextlib.closing(_Repository(repository)) as repo,
        ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="kmirror-fetch") as pool,
    ):
        futures = [pool.submit(_download, jar, folder / jar.file, repo, stop) for jar in lock.jars]
        try:
            for future in as_completed(futures):
                future.result()
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            raise


def _download(jar: LockedJar, dest: Path, repo: _Repository, stop: threading.Event) -> None:
    """Fetch one jar, trying again on a network error or a file that does not match (a cut-off transfer)."""
    repository = repo.base
    url = jar.url(repository)
    where = f"the Maven repository {repository}" + ("" if repository == MAVEN_CENTRAL else f" (${REPOSITORY_ENV})")
    problem, actual = "", None
    for attempt in range(_ATTEMPTS):
        if attempt and stop.wait(_BACKOFF_S * attempt):
            return  # another download failed
        try:
            actual = _get(repo, url, dest, stop)
        except _Status as e:
            if e.code < 500 and e.code != 429:  # not there: asking again will not help
                raise LockError(
                    f"{url} answered {e}: {where} does not serve {jar.file}. "
                    f"A mirror must proxy Maven Central (set {REPOSITORY_ENV} to its maven2 URL, or unset it)"
                ) from None
            problem, actual = str(e), None
            continue
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets, a short read
            problem, actual = str(getattr(e, "reason", None) or e) or type(e).__name__, None
            continue
        if actual is None or actual == jar.sha256:
            return  # stopped, or done
    if actual is None:
        raise LockError(
            f"could not download {url} ({_ATTEMPTS} attempts; last: {problem}). Check the route to {where}: "
            f"a proxy goes in https_proxy, a mirror's maven2 URL in {REPOSITORY_ENV}"
        )
    raise LockError(
        f"{jar.file} from {url} has SHA-256 {actual}, but kmirror's jar lock pins {jar.sha256} "
        f"({_ATTEMPTS} downloads): {where} serves another file than the one kmirror was pinned to, so nothing "
        f"was installed. If {REPOSITORY_ENV} points at a mirror, check its copy of "
        f"{jar.group}:{jar.artifact}:{jar.version}; otherwise report it to kmirror's maintainers"
    )


def _get(repo: _Repository, url: str, dest: Path, stop: threading.Event) -> str | None:
    """Stream `url` into `dest`; its SHA-256, or None when `stop` was set meanwhile."""
    digest = hashlib.sha256()
    with repo.get(url) as response, dest.open("wb") as out:
        while chunk := response.read(_CHUNK):
            if stop.is_set():
                return None
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


class _Status(Exception):
    """The repository answered with another HTTP status than 200."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"HTTP {code} {reason}")
        self.code = code


class _Body(Protocol):
    def read(self, amt: int, /) -> bytes: ...


class _Repository:
    """GETs from one repository. Plain http(s) with no proxy: keep-alive connections, each reused from jar to jar
    by one worker at a time, so a set costs `WORKERS` DNS lookups and TLS handshakes instead of one per jar (one
    lookup in ~30 stalled for 5 s on the machine this was measured on). Through a proxy (`https_proxy`), from a
    `file://` folder, or after a redirect: urllib, one connection per jar."""

    def __init__(self, base: str) -> None:
        self.base = base
        parts = urllib.parse.urlsplit(base)
        proxied = parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.netloc)
        self._origin = (parts.scheme, parts.netloc) if parts.scheme in ("http", "https") and not proxied else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def get(self, url: str) -> Iterator[_Body]:
        if self._origin is None:
            with _urlopen(url) as response:
                yield response
            return
        conn, reuse = self._take(), False
        try:
            conn.request("GET", urllib.parse.urlsplit(url).path, headers=_HEADERS)
            response = conn.getresponse()
            if response.status == 200:
                yield response
                reuse = response.isclosed()  # read to its end (not stopped half-way): ready for the next jar
                return
            response.read()
            reuse, location = True, response.getheader("Location")
        finally:
            if reuse:
                self._give(conn)
            else:
                conn.close()
        if response.status not in _REDIRECTS or not location:
            raise _Status(response.status, response.reason)
        with _urlopen(urllib.parse.urljoin(url, location)) as redirected:  # a mirror that keeps jars elsewhere
            yield redirected

    def _take(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        assert self._origin is not None
        scheme, netloc = self._origin
        kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        return kind(netloc, timeout=_TIMEOUT_S)

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


@contextlib.contextmanager
def _urlopen(url: str) -> Iterator[_Body]:
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=_HEADERS), timeout=_TIMEOUT_S)
    except urllib.error.HTTPError as e:
        e.close()
        raise _Status(e.code, str(e.reason)) from None
    with response:
        yield response
