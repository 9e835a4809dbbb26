"""`make lock` (`python -m reconciler.artifacts.lock`): pins every jar set kmirror fetches in `jvm/locks`.

For each of `jars.known_sets` (the spark-kafka set at the installed pyspark, which pyproject.toml pins), Maven,
the reference resolver (CI's), resolves the set twice into a temporary folder: once with exactly the command
`jars` runs (the flat folder a user's cache gets: the file names the lock records), once with
`-Dmdep.useRepositoryLayout=true` (each jar under `<group path>/<artifact>/<version>/`: its coordinates). The two
must agree jar for jar. Maven uses a fresh local repository with `--strict-checksums`, so every jar matched
Central's checksum on its way in before its SHA-256 is written down. Locks of sets no longer known are deleted.

Run it after editing `jvm/pom.xml`, a Kafka version in `jars`, or the pyspark pin; tests/unit/test_artifacts.py
fails while a lock is stale. Needs Maven and the network (~250 MB; 30 s when this was written).

Must not: run inside kmirror (it is a maintainer's tool), or write anywhere but `jvm/locks` and a temporary
folder (it leaves `~/.m2` alone).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from reconciler.artifacts import jars, pinned


def main() -> int:
    mvn = shutil.which("mvn")
    if mvn is None:
        print("make lock: needs Maven (`mvn`) on PATH (apt-get install maven)", file=sys.stderr)
        return 1
    import pyspark

    jvm_dir = Path(jars.__file__).parent / "jvm"
    locks = jvm_dir / "locks"
    locks.mkdir(exist_ok=True)
    pom_text = (jvm_dir / "pom.xml").read_text()
    sets = jars.known_sets(pyspark.__version__)
    with tempfile.TemporaryDirectory(prefix="kmirror-lock-") as tmp:
        for jar_set in sets:
            try:
                lock = _lock(mvn, jvm_dir, jar_set, pom_text, Path(tmp))
            except RuntimeError as e:
                print(f"make lock: {jar_set.name}: {e}", file=sys.stderr)
                return 1
            (locks / f"{jar_set.name}.json").write_text(pinned.render_lock(lock))
            print(f"make lock: {jar_set.name}: {len(lock.jars)} jars", file=sys.stderr)
    for old in sorted(locks.glob("*.json")):
        if old.stem not in {s.name for s in sets}:
            old.unlink()
            print(f"make lock: removed {old.name} (kmirror no longer fetches that set)", file=sys.stderr)
    return 0


def _lock(mvn: str, jvm_dir: Path, jar_set: jars.JarSet, pom_text: str, tmp: Path) -> pinned.Lock:
    flat, layout = tmp / jar_set.name, tmp / f"{jar_set.name}-layout"
    strict = [f"-Dmaven.repo.local={tmp / 'm2'}", "--strict-checksums"]
    _run([*jars.maven_command(mvn, jvm_dir, jar_set, flat), *strict])
    _run([*jars.maven_command(mvn, jvm_dir, jar_set, layout), *strict, "-Dmdep.useRepositoryLayout=true"])
    # the repository layout is a local repository (maven-metadata-local.xml, _remote.repositories): the jars
    # matter, and the flat folder must hold the same ones
    copied = [path for path in layout.rglob("*.jar") if path.is_file()]
    found = {path.name: _coordinates(path.relative_to(layout)) for path in copied}
    if len(found) != len(copied):
        raise RuntimeError("two artifacts share a file name, so the flat folder holds only one of them")
    names = {path.name for path in flat.iterdir()}
    if names != set(found):
        raise RuntimeError(f"the flat and the repository-layout copies differ: {sorted(names ^ set(found))}")
    locked = []
    for name, (group, artifact, version, classifier) in found.items():
        sha256 = _sha256(flat / name)
        if sha256 != _sha256(layout / Path(*group.split("."), artifact, version, name)):
            raise RuntimeError(f"{name} differs between the flat and the repository-layout copies")
        locked.append(pinned.LockedJar(group, artifact, version, classifier, name, sha256))
    return pinned.Lock(
        name=jar_set.name,
        profiles=jar_set.profiles,
        properties=jar_set.properties,
        fingerprint=pinned.fingerprint(pom_text, jar_set.profiles, jar_set.properties),
        jars=tuple(locked),
    )


def _coordinates(relative: Path) -> tuple[str, str, str, str]:
    """`org/apache/kafka/kafka_2.13/3.9.2/kafka_2.13-3.9.2.jar` -> group, artifact, version, classifier ("")."""
    *group, artifact, version, name = relative.parts
    prefix = f"{artifact}-{version}"
    rest = name.removeprefix(prefix).removesuffix(".jar")
    if not group or not name.startswith(prefix) or not name.endswith(".jar") or rest[:1] not in ("", "-"):
        raise RuntimeError(f"{relative} is not `<group path>/<artifact>/<version>/<artifact>-<version>[-c].jar`")
    return ".".join(group), artifact, version, rest[1:]


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _run(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"Maven failed:\n{' '.join(cmd)}\n{jars.output_tail(result)}")


if __name__ == "__main__":
    sys.exit(main())
