"""Compiles Java sources that ship in kmirror's packages into a jar in the kmirror cache, with `javac`: the job's
interceptor jar and the client-quota tool are both built this way, once per source version.

Must not: run anything but `javac`, or write outside the target's folder.
"""

from __future__ import annotations

import subprocess
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from reconciler.artifacts.jars import ArtifactError


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
