"""The job's Python environment as one archive (`spark.archives`), built once per kmirror version and install: what a
YARN container needs to run the job without kmirror installed on the node.

`job_env_archive()` packs, from the interpreter kmirror runs with, the installed distributions kmirror needs at run
time (its requirements plus the `spark` and `aws` extras, and theirs, as installed) and kmirror's own `reconciler`
package (copied, so an editable install packs the same code) into a venv-like tree:

    pyvenv.cfg                        home = the base interpreter's folder
    bin/python                        a symbolic link to the base interpreter (`sys._base_executable`)
    lib/pythonX.Y/site-packages/...   the packages, without pyspark's jars (Spark's jars come from spark.yarn.jars)

as `<cache>/job-env/<key>/kmirror-env.tar.gz`, where the key hashes the interpreter, kmirror's version and source,
and every packed distribution's name and version. Like venv-pack's archives it holds no interpreter: the nodes need
the same Python at the same path (true for nodes built from one image); the packages come with the job.

Must not: write outside its cache folder, or pack anything of the checkout but the `reconciler` package.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import re
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from reconciler.artifacts.jars import cache_root

#: The extras of kmirror a job runs with (installed ones only).
_EXTRAS = ("spark", "aws")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SKIP = ("pyspark/jars/", "pyspark/examples/", "pyspark/data/", "pyspark/licenses/")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed() -> dict[str, md.Distribution]:
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(_norm(name), dist)
    return found


def job_distributions() -> list[md.Distribution]:
    """The installed distributions the job imports: kmirror's requirements (with its run-time extras), closed."""
    installed = _installed()
    wanted: list[str] = []
    for req in md.distribution("kmirror").requires or []:
        marker = req.split(";", 1)[1] if ";" in req else ""
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra is None or extra.group(1) in _EXTRAS:
            match = _NAME.match(req)
            if match:
                wanted.append(_norm(match.group(1)))
    seen: dict[str, md.Distribution] = {}
    while wanted:
        name = wanted.pop()
        if name in seen or name not in installed or name == "kmirror":
            continue
        dist = seen[name] = installed[name]
        for req in dist.requires or []:
            if "extra" in req.split(";", 1)[-1] and ";" in req:
                continue  # an optional extra of a dependency: not needed to run
            match = _NAME.match(req)
            if match:
                wanted.append(_norm(match.group(1)))
    return sorted(seen.values(), key=lambda d: _norm(d.metadata["Name"]))


def _package_root() -> Path:
    import reconciler

    return Path(reconciler.__file__).parent


def _key(dists: list[md.Distribution]) -> str:
    digest = hashlib.sha256(f"{sys._base_executable} {sys.version}".encode())  # type: ignore[attr-defined]
    for dist in dists:
        digest.update(f"{dist.metadata['Name']}=={dist.version}\n".encode())
    for path in sorted(_package_root().rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_package_root())).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _files(dists: list[md.Distribution]) -> Iterator[tuple[Path, str]]:
    """(file on disk, path under site-packages) of every packed file."""
    for dist in dists:
        for entry in dist.files or []:
            relative = entry.as_posix()
            if relative.startswith("..") or relative.startswith(_SKIP) or "/__pycache__/" in f"/{relative}":
                continue
            source = Path(str(dist.locate_file(entry)))
            if source.is_file():
                yield source, relative
    root = _package_root()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield path, f"reconciler/{path.relative_to(root).as_posix()}"


def job_env_archive() -> tuple[Path, float | None]:
    """The archive (built on first use) and the seconds building it took (None when it was cached)."""
    dists = job_distributions()
    target = cache_root() / "job-env" / _key(dists) / "kmirror-env.tar.gz"
    if target.exists():
        return target, None
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    base = Path(sys._base_executable)  # type: ignore[attr-defined]
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    cfg = f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {sys.version.split()[0]}\n"
    with (
        tempfile.NamedTemporaryFile(dir=target.parent, suffix=".tmp", delete=False) as tmp,
        tarfile.open(fileobj=tmp, mode="w:gz", compresslevel=6) as tar,
    ):
        _add_bytes(tar, "pyvenv.cfg", cfg.encode())
        link = tarfile.TarInfo("bin/python")
        link.type, link.linkname, link.mode = tarfile.SYMTYPE, str(base), 0o777
        tar.addfile(link)
        for source, relative in _files(dists):
            tar.add(str(source), arcname=f"{site}/{relative}", recursive=False)
    Path(tmp.name).replace(target)
    return target, time.monotonic() - started


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))
