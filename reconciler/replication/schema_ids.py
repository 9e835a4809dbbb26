"""The producer settings that turn on schema id translation in the job (`jvm/SchemaIds.java`) for a flow with
`sync.schemas`: the source and target registries' urls and, resolved here in the driver, their credentials (the
Authorization header's value, in a setting whose name Spark's default redaction hides; the scrubber learns it).

The job starts with an empty id map: the first record of each source id looks it up on the source registry and
registers it on the target under the record's TopicNameStrategy subject (which answers with the id apply already
registered, when it did), once per JVM. So a schema registered on the source while the job runs reaches the target
registry before its first record, and a job spec never changes because a new schema appeared.

Must not: log or print the settings (they hold credentials), or translate anything itself (the JVM does).
"""

from __future__ import annotations

from pathlib import Path

from reconciler.jobcontract.spec import JobSpec
from reconciler.spec.models import FlowSpec
from reconciler.spec.redaction import remember
from reconciler.spec.schema_registry import connection

PREFIX = "kmirror.schemas."


def schema_id_settings(spec: JobSpec, flow: FlowSpec) -> dict[str, str]:
    """`kmirror.schemas.*` producer settings for `flow` (empty when it does not sync schemas)."""
    if not flow.sync.schemas:
        return {}
    settings: dict[str, str] = {}
    for side, alias in (("source", flow.source), ("target", flow.target)):
        registry = spec.cluster(alias).schema_registry
        if registry is None:
            return {}  # validation refuses such a file; an old job spec may lack it
        conn = connection(registry, spec.base_dir)
        settings[f"{PREFIX}{side}.url"] = conn.url
        if conn.ca_file:
            # The PEM text, not the path: executors on other hosts may not have the driver's files.
            settings[f"{PREFIX}{side}.ssl.ca.pem"] = Path(conn.ca_file).read_text()
        for name, value in conn.headers:
            if name == "Authorization":
                # Named `token` so that Spark's default spark.redaction.regex hides it in its UI and event logs; and
                # the scrubber learns it, as it learnt the password it is made from (base64 hides it from a match).
                settings[f"{PREFIX}{side}.auth.token"] = value
                remember(value)
    return settings
