"""Resolving the JVM artifacts without Maven: Apache Ivy, the resolver Spark itself ships and uses (`--packages`).

A user who installed kmirror with pip (`kmirror[spark]`) has Java and pyspark, whose `jars/` hold Ivy, but maybe
no Maven. `ivy_module` turns one or more profiles of `jvm/pom.xml` (the one list of what kmirror fetches) into an
Ivy module descriptor with the same dependencies and exclusions; `ivy_command` is the command that resolves it
from Maven Central into a folder. Ivy verifies every download against the repository's SHA-1 (and MD5) checksums
and keeps a cache, so a set is downloaded once.

Ivy picks the newest of conflicting transitive versions where Maven picks the nearest; the sets only differ in
such transitive versions, which the runners filter against pyspark's own jars anyway.

Must not: run anything (the caller does), or read anything but the pom text it is given.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_PROPERTY = re.compile(r"\$\{([^}]+)\}")


def ivy_module(pom_text: str, profiles: Sequence[str], properties: Mapping[str, str]) -> str:
    """An ivy.xml with the dependencies (and their exclusions) of `profiles`, `${..}` filled from the pom's
    properties and `properties` (which win)."""
    pom = ET.fromstring(pom_text)
    values = {el.tag.split("}", 1)[1]: (el.text or "") for el in pom.findall("m:properties/*", _NS)}
    values.update(properties)

    def fill(text: str | None) -> str:
        return _PROPERTY.sub(lambda m: values.get(m.group(1), m.group(0)), (text or "").strip())

    found = {p.findtext("m:id", namespaces=_NS): p for p in pom.findall("m:profiles/m:profile", _NS)}
    missing = [p for p in profiles if p not in found]
    if missing:
        raise ValueError(f"the pom has no profile {', '.join(missing)}")
    lines = [
        '<ivy-module version="2.0">',
        '  <info organisation="dev.kmirror" module="kmirror-jvm-deps"/>',
        '  <configurations><conf name="default"/></configurations>',
        "  <dependencies>",
    ]

    def text(node: ET.Element, tag: str) -> str:
        return fill(node.findtext(f"m:{tag}", namespaces=_NS))

    for name in profiles:
        for dep in found[name].findall("m:dependencies/m:dependency", _NS):
            org, module, rev = text(dep, "groupId"), text(dep, "artifactId"), text(dep, "version")
            excludes = [
                (text(e, "groupId"), text(e, "artifactId")) for e in dep.findall("m:exclusions/m:exclusion", _NS)
            ]
            attrs = f"org={quoteattr(org)} name={quoteattr(module)} rev={quoteattr(rev)}"
            head = f'    <dependency {attrs} conf="default->default"'
            if not excludes:
                lines.append(head + "/>")
                continue
            lines.append(head + ">")
            lines.extend(f"      <exclude org={quoteattr(o)} module={quoteattr(m)}/>" for o, m in excludes)
            lines.append("    </dependency>")
    lines += ["  </dependencies>", "</ivy-module>", ""]
    return "\n".join(lines)


def ivy_command(java: str, ivy_jar: Path, module: Path, cache: Path, out: Path) -> list[str]:
    """Resolve `module` from Maven Central (Ivy's default public resolver) and copy the jars into `out`."""
    return [
        java, "-jar", str(ivy_jar),
        "-ivy", str(module),
        "-cache", str(cache),
        "-confs", "default",
        "-types", "jar", "bundle",
        "-retrieve", f"{out}/[artifact]-[revision](-[classifier]).[ext]",
    ]  # fmt: skip
