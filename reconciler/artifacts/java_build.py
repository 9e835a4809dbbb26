"""Compiles Java sources that ship in kmirror's packages into a jar in the kmirror cache, with `javac`: the job's
interceptor jar, the client-quota tool, the Hadoop delete tool and the local Hadoop's main are all built this way,
once per source version (`cached_jar`).

Must not: run anything but `javac`, or write outside the target's folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from reconciler.artifacts.jars import ArtifactError, cache_root


def jdk_tool(name: str) -> str | None:
    """`java` or `javac` from `$JAVA_HOME/bin`, else from PATH; None when neither has it."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / name, os.X_OK):
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def sources_version(sources: Mapping[str, bytes]) -> str:
    """The version of a jar's sources (a hash of their texts, in order): a new jar is compiled when it changes."""
    return hashlib.sha256(b"".join(sources.values())).hexdigest()[:16]


def cached_jar(
    name: str,
    sources: Mapping[str, bytes],
    classpath: Callable[[], Sequence[Path | str]],
    *,
    what: str,
    no_javac: str,
    error: type[Exception] = ArtifactError,
) -> Path:
    """The jar `<cache>/jars/<name>-<version>/<name>.jar` of `sources`, compiled against `classpath()` on first use.
    Without a JDK's `javac` it raises `error(no_javac)`: that message says what needs the jar and what to install."""
    target = cache_root() / "jars" / f"{name}-{sources_version(sources)}" / f"{name}.jar"
    if target.exists():
        return target
    javac = jdk_tool("javac")
    if javac is None:
        raise error(no_javac)
    return compile_jar(javac, sources, classpath(), target, what)


def compile_jar(
    javac: str, sources: Mapping[str, bytes], classpath: Sequence[Path | str], target: Path, what: str
) -> Path:
    """Compile `sources` (file name -> text) against `classpath` into the jar `target`, written atomically (a
    reader never sees half a jar). `what` names the jar in the error when javac fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        paths = []
        for name, text in sources.items():
            (Path(work) / name).write_bytes(text)
            paths.append(str(Path(work) / name))
        classes = Path(work) / "classes"
        cmd = [javac, "--release", "11", "-nowarn", "-cp", ":".join(map(str, classpath)), "-d", str(classes), *paths]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ArtifactError(f"could not compile {what}:\n{result.stdout}{result.stderr}")
        staging = Path(work) / target.name
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: kmirror\n\n")
            for cls in sorted(classes.rglob("*.class")):
                jar.write(cls, cls.relative_to(classes).as_posix())
        staging.replace(target)
    return target
