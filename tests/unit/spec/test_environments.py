"""Per-environment values: `${env:..}`/`${file:..}` in bootstrap_servers, the state topic and Spark's location
are resolved at load, so one file serves staging and production and each gets its own spec digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.spec import SpecError, load, load_text

pytestmark = pytest.mark.unit

SPEC = """\
version: 1
clusters:
  onprem: {bootstrap_servers: "${env:ONPREM_BOOTSTRAP}"}
  cloud:
    bootstrap_servers: "${file:cloud-bootstrap.txt}"
    client: {sasl.password: "${env:CLOUD_PASSWORD}"}
state: {cluster: cloud, topic: "_kmirror.state-${env:ENVIRONMENT}"}
spark: {deploy: local, checkpoint_root: "s3a://kmirror-${env:ENVIRONMENT}/checkpoints"}
flows:
  - {name: onprem-to-cloud, source: onprem, target: cloud}
"""


def _write(tmp_path: Path, cloud: str) -> Path:
    (tmp_path / "cloud-bootstrap.txt").write_text(cloud + "\n")
    path = tmp_path / "kmirror.yaml"
    path.write_text(SPEC)
    return path


def test_each_environment_gets_its_own_values_and_digest(tmp_path: Path) -> None:
    staging_dir, prod_dir = tmp_path / "staging", tmp_path / "prod"
    staging_dir.mkdir(), prod_dir.mkdir()
    staging = load(_write(staging_dir, "cloud-stg:9092"), environ={"ONPREM_BOOTSTRAP": "a:9092", "ENVIRONMENT": "stg"})
    prod = load(_write(prod_dir, "cloud-prd:9092"), environ={"ONPREM_BOOTSTRAP": "b:9092", "ENVIRONMENT": "prd"})
    assert staging.state.clusters["onprem"].bootstrap_servers == "a:9092"
    assert prod.state.clusters["cloud"].bootstrap_servers == "cloud-prd:9092"  # one trailing newline dropped
    assert (staging.state.state.topic, prod.state.state.topic) == ("_kmirror.state-stg", "_kmirror.state-prd")
    assert prod.state.spark.checkpoint_root == "s3a://kmirror-prd/checkpoints"
    assert staging.state.spec_digest() != prod.state.spec_digest()
    assert staging.state.flow_digest("onprem-to-cloud") != prod.state.flow_digest("onprem-to-cloud")
    # a secret stays a reference, unresolved, whatever the environment
    assert str(prod.state.clusters["cloud"].client["sasl.password"]) == "${env:CLOUD_PASSWORD}"


def test_the_same_environment_gives_the_same_digest(tmp_path: Path) -> None:
    path = _write(tmp_path, "c:9092")
    env = {"ONPREM_BOOTSTRAP": "a:9092", "ENVIRONMENT": "stg"}
    assert load(path, environ=env).state.spec_digest() == load(path, environ=dict(env)).state.spec_digest()


def test_a_missing_variable_or_file_is_a_located_error_each(tmp_path: Path) -> None:
    path = tmp_path / "kmirror.yaml"
    path.write_text(SPEC)
    with pytest.raises(SpecError) as caught:
        load(path, environ={})
    found = {(i.line, str(i.path[-1]), i.message.split(" (")[0]) for i in caught.value.issues}
    assert found == {
        (3, "bootstrap_servers", "environment variable ONPREM_BOOTSTRAP is not set"),
        (
            5,
            "bootstrap_servers",
            f"cannot read secret file {tmp_path / 'cloud-bootstrap.txt'}: No such file or directory",
        ),
        (7, "topic", "environment variable ENVIRONMENT is not set"),
        (8, "checkpoint_root", "environment variable ENVIRONMENT is not set"),
    }


def test_a_resolved_value_is_validated_and_the_error_names_the_reference() -> None:
    text = "version: 1\nclusters: {a: {bootstrap_servers: '${env:BOOT}'}}\nstate: {cluster: a}\n"
    with pytest.raises(SpecError) as caught:
        load_text(text, environ={"BOOT": "no-port"})
    (issue,) = caught.value.issues
    assert issue.line == 2 and issue.message == "the value of ${env:BOOT} is not host:port"  # never 'no-port'
    assert "no-port" not in str(issue)


def test_aliases_and_flow_names_stay_literal() -> None:
    text = "version: 1\nclusters: {a: {bootstrap_servers: 'a:1'}}\nstate: {cluster: '${env:STATE_CLUSTER}'}\n"
    with pytest.raises(SpecError):
        load_text(text, environ={"STATE_CLUSTER": "a"})


def test_per_environment_values_are_shown_as_their_references_and_secrets_as_stars(tmp_path: Path) -> None:
    """A per-environment value read through a reference is shown as that reference (a `${file:..}` can read any
    file below the allowed folders, issue 35); a secret as `***`; literal values as they are."""
    from reconciler.spec.redaction import forget_all, scrub

    forget_all()
    try:
        environ = {"ONPREM_BOOTSTRAP": "onprem-kafka:9092", "ENVIRONMENT": "prd", "CLOUD_PASSWORD": "pw-0123456789"}
        loaded = load(_write(tmp_path, "cloud-kafka:9092"), environ=environ)
        from reconciler.spec.redaction import learn

        learn(loaded.state, environ=environ)
        text = "onprem-kafka:9092 cloud-kafka:9092 _kmirror.state-prd password pw-0123456789 literal-kafka:9092"
        assert scrub(text) == (
            "${env:ONPREM_BOOTSTRAP} ${file:cloud-bootstrap.txt} _kmirror.state-${env:ENVIRONMENT} password *** "
            "literal-kafka:9092"
        )
    finally:
        forget_all()
