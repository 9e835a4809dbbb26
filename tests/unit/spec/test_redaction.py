"""Secrets cannot leak: the scrubber knows every resolved value, the CLI's output and errors pass through it,
`${file:}` reads only below allowed folders, and credential-holding keys cannot be written inline."""

from __future__ import annotations

import io
import logging
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.spec import SecretRef, SecretResolutionError, load_text
from reconciler.spec.redaction import ScrubbingStream, forget_all, learn, scrub, scrub_bytes, scrubbing_log_filter
from reconciler.spec.secrets import is_sensitive_key

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _fresh_scrubber() -> Iterator[None]:
    forget_all()
    yield
    forget_all()


def _secret() -> str:
    return f'p"w\\{uuid.uuid4().hex}'


def test_a_resolved_value_is_scrubbed_in_every_form_it_takes() -> None:
    secret = _secret()
    SecretRef("${env:PW}").resolve(environ={"PW": secret})
    escaped = secret.replace("\\", "\\\\").replace('"', '\\"')
    text = f'raw {secret} jaas password="{escaped}" json {secret!r}'
    assert secret not in scrub(text) and escaped not in scrub(text)
    assert scrub(text).startswith('raw *** jaas password="***"')
    assert secret.encode() not in scrub_bytes(f"x{secret}y".encode())


def test_learning_a_desired_state_resolves_every_reference_without_failing_on_missing_ones(tmp_path: Path) -> None:
    (tmp_path / "pw.txt").write_text("from-the-file-123\n")
    state = load_text(
        """version: 1
clusters:
  a: {bootstrap_servers: "a:1", client: {sasl.password: "${env:KM_PW}", ssl.key.password: "${file:pw.txt}"}}
  b: {bootstrap_servers: "b:1", client: {sasl.password: "${env:KM_MISSING}"}}
state: {cluster: b}
spark: {conf: {spark.hadoop.fs.s3a.secret.key: "${env:KM_S3}"}}
"""
    ).state.with_source_path(tmp_path / "kmirror.yaml")
    learn(state, environ={"KM_PW": "env-secret-456", "KM_S3": "s3-secret-789"})
    assert scrub("env-secret-456 from-the-file-123 s3-secret-789") == "*** *** ***"
    learn(state.model_dump(mode="json"), base_dir=tmp_path, environ={"KM_PW": "dumped-secret-000"})
    assert scrub("dumped-secret-000") == "***"


def test_the_short_secret_rule() -> None:
    """8+ characters: scrubbed anywhere; 3 to 7: only where they stand alone; 1 or 2: not at all (issue 35)."""
    for value in ("ab", "abc", "pass", "s3cr3t-x"):
        SecretRef("${env:X}").resolve(environ={"X": value})
    assert scrub("ab abc") == "ab ***"  # 2 characters: no secret worth the name
    assert scrub("password=pass; passing; pass") == "password=***; passing; ***"
    assert scrub("abcd xabc abc.") == "abcd xabc ***."
    assert scrub("mys3cr3t-xyz") == "my***yz"  # 8 characters: inside words too


def test_the_scrubbing_stream_and_log_filter() -> None:
    secret = _secret()
    SecretRef("${env:PW}").resolve(environ={"PW": secret})
    inner = io.StringIO()
    ScrubbingStream(inner).write(f"a {secret} b")
    assert inner.getvalue() == "a *** b"
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(scrubbing_log_filter())
    logger = logging.getLogger("kmirror.test.redaction")
    logger.addHandler(handler)
    try:
        logger.error("client failed with %s", secret)
        try:
            raise RuntimeError(f"bad value {secret}")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logger.removeHandler(handler)
    assert secret not in out.getvalue() and "client failed with ***" in out.getvalue()


def test_file_references_read_only_below_allowed_roots(tmp_path: Path) -> None:
    config_dir, other = tmp_path / "repo", tmp_path / "elsewhere"
    config_dir.mkdir()
    other.mkdir()
    (other / "key").write_text("outside-secret")
    (config_dir / "inside").write_text("inside-secret")
    (config_dir / "link").symlink_to(other / "key")
    assert SecretRef("${file:inside}").resolve(config_dir, environ={}) == "inside-secret"
    for ref in (f"${{file:{other / 'key'}}}", "${file:../elsewhere/key}", "${file:link}"):
        with pytest.raises(SecretResolutionError, match="outside the folders kmirror may read secrets from"):
            SecretRef(ref).resolve(config_dir, environ={})
    roots = {"KMIRROR_FILE_ROOTS": f"/nonexistent{os.pathsep}{other}"}
    assert SecretRef(f"${{file:{other / 'key'}}}").resolve(config_dir, environ=roots) == "outside-secret"
    assert SecretRef("${file:link}").resolve(config_dir, environ=roots) == "outside-secret"


def test_run_secrets_is_allowed_unless_the_operator_lists_other_roots(tmp_path: Path) -> None:
    from reconciler.spec.secrets import allowed_file_roots

    assert Path("/run/secrets").resolve() in allowed_file_roots(tmp_path, {})
    assert Path("/run/secrets").resolve() not in allowed_file_roots(tmp_path, {"KMIRROR_FILE_ROOTS": "/etc/kafka"})


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "ssl.key.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.extensions",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.session.token",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.gs.auth.client.secret",
        "spark.authenticate.secret",
        "basic.auth.user.info",
    ],
)
def test_credential_keys_are_sensitive(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.truststore.type",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.config",
        "sasl.mechanism",
        "security.protocol",
        "spark.hadoop.fs.s3a.aws.credentials.provider",
    ],
)
def test_settings_that_are_not_credentials_are_not_sensitive(key: str) -> None:
    assert not is_sensitive_key(key)


def test_an_inline_cloud_storage_key_is_refused_with_its_line() -> None:
    from reconciler.spec import SpecError

    with pytest.raises(SpecError) as caught:
        load_text(
            """version: 1
clusters:
  a: {bootstrap_servers: "a:1"}
state: {cluster: a}
spark: {conf: {spark.hadoop.fs.s3a.secret.key: "AKIAsomething"}}
"""
        )
    assert "kmirror.yaml:5:" in str(caught.value) and "a secret is written inline" in str(caught.value)


def test_the_cli_scrubs_a_secret_that_a_failing_command_would_print(tmp_path: Path) -> None:
    secret = f"sentinel-{uuid.uuid4().hex}"
    spec = tmp_path / "kmirror.yaml"
    # librdkafka rejects this mechanism when the client is built, and its error quotes the value.
    spec.write_text(
        """version: 1
clusters:
  a: {bootstrap_servers: "127.0.0.1:1", client: {security.protocol: SASL_PLAINTEXT, sasl.mechanism: "${env:KM_S}"}}
state: {cluster: a}
"""
    )
    result = CliRunner(env={"KM_S": secret}).invoke(main, ["plan", "-f", str(spec)])
    assert result.exit_code == 1
    assert "Unsupported SASL mechanism: ***" in result.output
    assert secret not in result.output


def test_files_kmirror_creates_are_private(tmp_path: Path) -> None:
    spec = tmp_path / "kmirror.yaml"
    spec.write_text('version: 1\nclusters:\n  a: {bootstrap_servers: "a:1"}\nstate: {cluster: a}\n')
    before = os.umask(0o022)
    try:
        result = CliRunner().invoke(main, ["schema"])
        assert result.exit_code == 0
        made = tmp_path / "made-after"
        made.write_text("x")
        assert stat.S_IMODE(made.stat().st_mode) == 0o600
    finally:
        os.umask(before)
