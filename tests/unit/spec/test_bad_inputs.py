"""Every way a user can get kmirror.yaml wrong gives one located message: the line, the field, what to do."""

from __future__ import annotations

import pytest

from reconciler.spec import SpecError, load_text

pytestmark = pytest.mark.unit

HEAD = """version: 1
clusters:
  a: {bootstrap_servers: "a:9092"}
  b: {bootstrap_servers: "b:9092"}
state: {cluster: b}
flows:
  - name: a-to-b
    source: a
    target: b
"""
# Lines 1-9 above; extra flow lines start at line 10.


def flow(*lines: str) -> str:
    return HEAD + "".join(f"    {line}\n" for line in lines)


def second_flow(*lines: str) -> str:
    return HEAD + "".join(f"{line}\n" for line in lines)


CASES: list[tuple[str, str, int, str]] = [
    # (id, yaml, line, expected fragment of the message)
    ("yaml-syntax", "version: 1\nclusters: {a: [\n", 3, "YAML syntax error"),
    ("yaml-tab", "version: 1\nclusters:\n\ta: 1\n", 3, "YAML syntax error"),
    ("empty-file", "", 1, "the file is empty"),
    ("not-a-mapping", "- a\n- b\n", 1, "must be a mapping of settings"),
    ("two-documents", "version: 1\n---\nversion: 1\n", 2, "YAML syntax error"),
    ("duplicate-top-key", HEAD + "version: 1\n", 10, "duplicate key 'version' (first defined at line 1)"),
    ("duplicate-flow-key", flow("source: b"), 10, "duplicate key 'source' (first defined at line 8)"),
    ("custom-tag", HEAD.replace('"a:9092"', "!secret a:9092"), 3, "unsupported YAML tag !secret"),
    ("version-wrong", HEAD.replace("version: 1", "version: 2"), 1, "unsupported version 2"),
    ("version-missing", HEAD.replace("version: 1\n", "# no version\n"), 2, "missing required field 'version'"),
    ("unknown-top-field", HEAD + "prune_all: true\n", 10, "unknown field 'prune_all'"),
    ("unknown-field-suggestion", flow("topic: {include: [x]}"), 10, "did you mean 'topics'?"),
    (
        "cluster-missing-bootstrap",
        HEAD.replace('{bootstrap_servers: "a:9092"}', "{client: {}}"),
        3,
        "missing required field 'bootstrap_servers'",
    ),
    ("bootstrap-not-host-port", HEAD.replace('"a:9092"', '"a"'), 3, "'a' is not host:port"),
    (
        "bootstrap-in-client",
        HEAD.replace(
            '{bootstrap_servers: "a:9092"}', '{bootstrap_servers: "a:9092", client: {bootstrap.servers: "x:1"}}'
        ),
        3,
        "bootstrap.servers belongs in bootstrap_servers",
    ),
    (
        "cluster-alias-bad",
        HEAD.replace("  a: {", "  a.b: {").replace("source: a", "source: a.b"),
        3,
        "cluster alias 'a.b'",
    ),
    (
        "client-value-mapping",
        HEAD.replace('{bootstrap_servers: "a:9092"}', '{bootstrap_servers: "a:9092", client: {x: {y: 1}}}'),
        3,
        "expected a string, number or boolean, got a mapping",
    ),
    (
        "inline-password",
        HEAD.replace(
            '{bootstrap_servers: "a:9092"}', '{bootstrap_servers: "a:9092", client: {sasl.password: hunter2}}'
        ),
        3,
        "a secret is written inline",
    ),
    (
        "inline-jaas-password",
        HEAD.replace(
            '{bootstrap_servers: "a:9092"}',
            '{bootstrap_servers: "a:9092", client: {sasl.jaas.config: \'x required username="u" password="p";\'}}',
        ),
        3,
        "a secret is written inline",
    ),
    (
        "bad-reference-kind",
        HEAD.replace(
            '{bootstrap_servers: "a:9092"}', '{bootstrap_servers: "a:9092", client: {sasl.password: "${vault:x}"}}'
        ),
        3,
        "unknown reference ${vault:x}",
    ),
    (
        "bad-reference-unclosed",
        HEAD.replace(
            '{bootstrap_servers: "a:9092"}', '{bootstrap_servers: "a:9092", client: {sasl.password: "${env:X"}}'
        ),
        3,
        "is not closed",
    ),
    (
        "bad-env-name",
        HEAD.replace(
            '{bootstrap_servers: "a:9092"}', '{bootstrap_servers: "a:9092", client: {sasl.password: "${env:1X}"}}'
        ),
        3,
        "not a valid environment variable name",
    ),
    ("state-unknown-cluster", HEAD.replace("state: {cluster: b}", "state: {cluster: c}"), 5, "unknown cluster 'c'"),
    ("state-missing", HEAD.replace("state: {cluster: b}\n", "\n"), 1, "missing required field 'state'"),
    (
        "state-topic-invalid",
        HEAD.replace("state: {cluster: b}", "state: {cluster: b, topic: 'my state'}"),
        5,
        "is not a valid topic name",
    ),
    ("flow-unknown-source", HEAD.replace("source: a", "source: x"), 8, "unknown cluster 'x'"),
    ("flow-unknown-target-suggest", HEAD.replace("target: b", "target: bb"), 9, "unknown cluster 'bb'"),
    ("flow-into-itself", HEAD.replace("target: b", "target: a"), 9, "replicates cluster 'a' into itself"),
    ("flow-missing-target", HEAD.replace("    target: b\n", ""), 7, "missing required field 'target'"),
    ("flow-name-bad", HEAD.replace("name: a-to-b", "name: 'a to b'"), 7, "flow name 'a to b' is not allowed"),
    (
        "flow-duplicate-name",
        second_flow("  - name: a-to-b", "    source: b", "    target: a", "    naming: {policy: prefix}"),
        10,
        "flow name 'a-to-b' is already used by flows[0] (line 7)",
    ),
    ("naming-policy-typo", flow("naming: {policy: identiy}"), 10, "must be one of 'prefix', 'identity', 'template'"),
    ("naming-template-missing", flow("naming: {policy: template}"), 10, "policy 'template' needs a template"),
    (
        "naming-template-without-topic",
        flow("naming: {policy: template, template: 'x-{source}'}"),
        10,
        "must contain {topic} exactly once",
    ),
    (
        "naming-template-other-policy",
        flow("naming: {policy: prefix, template: '{source}.{topic}'}"),
        10,
        "a template is only used with policy 'template'",
    ),
    ("naming-separator-bad", flow("naming: {policy: prefix, separator: '/'}"), 10, "separator '/' is not allowed"),
    (
        "alias-contains-separator",
        HEAD.replace("  a: {", "  a-1: {").replace("source: a", "source: a-1") + "    naming: {separator: '-'}\n",
        8,
        "contains the naming separator '-'",
    ),
    (
        "regex-does-not-compile",
        flow("topics: {include: ['orders(']}"),
        10,
        "does not compile: missing ), unterminated subpattern",
    ),
    ("regex-glob", flow("topics: {include: ['*orders']}"), 10, "this looks like a glob"),
    (
        "regex-python-named-group",
        flow("topics: {include: ['(?P<x>orders)']}"),
        10,
        "named groups (?P<name>...) are Python-only",
    ),
    (
        "regex-java-named-group",
        flow("topics: {include: ['(?<x>orders)']}"),
        10,
        "named groups (?<name>...) are Java-only",
    ),
    (
        "regex-global-flag",
        flow("topics: {include: ['orders', '(?i)payments']}"),
        10,
        "global inline flags (?i) are not portable",
    ),
    ("regex-java-quote", flow("topics: {exclude: ['\\Qa.b\\E']}"), 10, "\\Q...\\E quoting is Java-only"),
    ("regex-unicode-class", flow("groups: {include: ['\\p{Alpha}+']}"), 10, "\\p{...} character classes are Java-only"),
    (
        "regex-class-intersection",
        flow("topics: {include: ['[a-z&&[^x]]']}"),
        10,
        "'&&' inside [...] is a class intersection in Java",
    ),
    ("regex-no-lower-bound", flow("topics: {include: ['a{,3}']}"), 10, "'{,n}' without a lower bound is Python-only"),
    ("regex-backreference", flow("topics: {include: ['(a)\\1']}"), 10, "back-reference \\1 is not supported"),
    ("regex-lowercase-z", flow("topics: {include: ['orders\\z']}"), 10, "\\z is Java-only"),
    ("regex-config-exclude", flow("sync: {config_exclude: ['retention[']}"), 10, "does not compile"),
    (
        "replication-factor-zero",
        flow("topic_defaults: {replication_factor: 0}"),
        10,
        "replication_factor 0 is not allowed",
    ),
    (
        "replication-factor-text",
        flow("topic_defaults: {replication_factor: three}"),
        10,
        "expected a whole number, got 'three'",
    ),
    ("start-from-bad", flow("replication: {start_from: beginning}"), 10, "'beginning' is not a place to start"),
    ("offset-lag-negative", flow("offsets: {offset_lag_max: -1}"), 10, "must be at least 0, got -1"),
    ("duration-bad", flow("offsets: {checkpoint_interval: 10 seconds}"), 10, "'10 seconds' is not a duration"),
    ("duration-zero", flow("heartbeats: {interval: 0s}"), 10, "interval must be longer than 0s"),
    ("bool-bad", flow("sync: {acls: maybe}"), 10, "expected true or false, got 'maybe'"),
    ("topics-not-list", flow("topics: {include: orders}"), 10, "expected a list"),
    ("topics-not-mapping", flow("topics: [orders]"), 10, "expected a mapping"),
    (
        "group-offsets-without-checkpoints",
        flow("sync: {group_offsets: true}", "offsets: {emit_checkpoints: false}"),
        10,
        "group offsets are translated from checkpoints",
    ),
    (
        "spark-deploy-master",
        HEAD.replace("flows:", "spark: {deploy: standalone, master: 'local[2]'}\nflows:"),
        6,
        "deploy 'standalone' needs master",
    ),
    (
        "spark-standalone-no-rest",
        HEAD.replace("flows:", "spark: {deploy: standalone, master: 'spark://m:7077', checkpoint_root: /k}\nflows:"),
        6,
        "needs rest_url",
    ),
    (
        "moved-to-a-flow-that-does-not-exist",
        HEAD + "moved:\n  - {from: old-name, to: nope}\n",
        11,
        "no flow named 'nope'",
    ),
    (
        "moved-from-a-flow-that-still-exists",
        HEAD + "moved:\n  - {from: a-to-b, to: a-to-b}\n",
        11,
        "still exists, so it was not renamed",
    ),
    (
        "spark-standalone-relative-checkpoint-root",
        HEAD.replace(
            "flows:",
            "spark: {deploy: standalone, master: 'spark://m:7077', rest_url: 'http://m:6066', "
            "checkpoint_root: .kmirror/checkpoints}\nflows:",
        ),
        6,
        "on a filesystem mounted at the same path on every worker",
    ),
    (
        "spark-standalone-s3a-checkpoint-root",
        HEAD.replace(
            "flows:",
            "spark: {deploy: standalone, master: 'spark://m:7077', rest_url: 'http://m:6066', "
            "checkpoint_root: 's3a://bucket/kmirror'}\nflows:",
        ),
        6,
        "with deploy 'standalone' set job_folder_root to where each job's spec, status and stop request go",
    ),
    (
        "spark-yarn-job-folder-root-not-hdfs",
        HEAD.replace(
            "flows:",
            "spark: {deploy: yarn, checkpoint_root: 's3a://bucket/kmirror', job_folder_root: '/mnt/k'}\nflows:",
        ),
        6,
        "with deploy 'yarn' kmirror reads the jobs' folders through WebHDFS; give an hdfs:// URI",
    ),
    (
        "spark-job-folder-root-beside-hdfs",
        HEAD.replace(
            "flows:",
            "spark: {deploy: yarn, checkpoint_root: 'hdfs://nn/k', job_folder_root: 'hdfs://nn/j'}\nflows:",
        ),
        6,
        "is for a checkpoint_root on object storage (s3a:)",
    ),
    (
        "spark-yarn-s3-key-reference",
        HEAD.replace(
            "flows:",
            "spark:\n  deploy: yarn\n  checkpoint_root: 's3a://bucket/kmirror'\n  conf:\n"
            "    spark.hadoop.fs.s3a.secret.key: '${env:S3_SECRET}'\nflows:",
        ),
        10,
        "with deploy 'yarn' an object-store credential cannot come from kmirror",
    ),
    (
        "spark-mode-unknown",
        HEAD.replace("flows:", "spark: {conf: {spark.kmirror.mode: continuous}}\nflows:"),
        6,
        "spark.kmirror.mode is 'continuous'; use one of microbatch, realtime",
    ),
    (
        "spark-realtime-interval-too-short",
        HEAD.replace(
            "flows:", "spark: {conf: {spark.kmirror.mode: realtime, spark.kmirror.triggerInterval: 200ms}}\nflows:"
        ),
        6,
        "spark.kmirror.triggerInterval is '200ms': in real-time mode it is the checkpoint interval, at least 5 seconds",
    ),
    ("clusters-empty", "version: 1\nclusters: {}\nstate: {cluster: a}\n", 2, "must not be empty"),
    (
        "identity-cycle",
        second_flow(
            "    naming: {policy: identity}",
            "  - name: b-to-a",
            "    source: b",
            "    target: a",
            "    naming: {policy: identity}",
        ),
        10,
        "replication cycle a → b → a",
    ),
    (
        "identity-cycle-two-hops",
        HEAD.replace("  b: {", "  c: {bootstrap_servers: 'c:1'}\n  b: {")
        + "    naming: {policy: identity}\n"
        + "  - {name: b-to-c, source: b, target: c, naming: {policy: identity}}\n"
        + "  - {name: c-to-a, source: c, target: a, naming: {policy: identity}}\n",
        11,
        "replication cycle a → b → c → a",
    ),
    (
        "literal-collision",
        HEAD.replace("  b: {", "  c: {bootstrap_servers: 'c:1'}\n  b: {")
        + "    topics: {include: [orders]}\n    naming: {policy: identity}\n"
        + "  - name: c-to-b\n    source: c\n    target: b\n"
        + "    topics: {include: [orders]}\n    naming: {policy: identity}\n",
        17,
        "both write remote topic 'orders' on 'b'",
    ),
]


@pytest.mark.parametrize(("text", "line", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_reported_with_its_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_text(text, file="kmirror.yaml")
    matching = [i for i in caught.value.errors if fragment in str(i)]
    assert matching, f"no error contains {fragment!r}; got:\n{caught.value}"
    assert matching[0].line == line, f"{fragment!r} reported at line {matching[0].line}, expected {line}"
    assert str(matching[0]).startswith(f"kmirror.yaml:{line}:")


def test_there_are_at_least_forty_distinct_bad_inputs() -> None:
    assert len({c[0] for c in CASES}) >= 40
    assert len({c[1] for c in CASES}) == len(CASES)


def test_all_errors_are_reported_at_once() -> None:
    text = HEAD.replace('"b:9092"', '"b"').replace("state: {cluster: b}", "state: {cluster: c}") + (
        "    topics: {include: ['*x']}\n    naming: {policy: identiy}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_text(text)
    lines = sorted(i.line for i in caught.value.errors)
    assert lines == [4, 5, 10, 11], str(caught.value)


def test_message_format_names_file_field_and_fix() -> None:
    with pytest.raises(SpecError) as caught:
        load_text(HEAD.replace("source: a", "source: x"), file="path/kmirror.yaml")
    (issue,) = caught.value.errors
    assert str(issue) == (
        "path/kmirror.yaml:8:13: flows[0].source: unknown cluster 'x' (declare it under clusters:, or use one of: a, b)"
    )
