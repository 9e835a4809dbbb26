"""Issue 35, part A, in the loader: what a pull request or a careless user can put in kmirror.yaml is refused with
its line in well under a second, and a value read through a reference never shows in a message.

- a per-environment field (`bootstrap_servers`, `state.topic`, `spark.*`) from `${env:}`/`${file:}` that is invalid:
  the message names the reference, never the value or a piece of it (a private key read as bootstrap servers);
- durations too large for any clock (`99999999999999999999999d`, `1e999`), YAML nested a thousand deep, a file
  that never ends (/dev/zero), control characters in a name, `ssl.*.location` outside the allowed folders.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.spec import SecretResolutionError, SpecError, load, load_text
from reconciler.spec.client_config import java_client_properties, kafka_client_config
from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.models import ClusterSpec
from reconciler.spec.printable import terminal_safe
from reconciler.spec.redaction import forget_all, scrub

pytestmark = pytest.mark.unit

SENTINEL = "sentinel-5f0c2a9e"
KEY = f"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n{SENTINEL}\n-----END PRIVATE KEY-----\n"
BASE = "version: 1\nclusters:\n  a: {bootstrap_servers: 'a:1'}\n  b: {bootstrap_servers: 'b:1'}\nstate: {cluster: a}\n"


@pytest.fixture(autouse=True)
def _fresh_scrubber() -> Iterator[None]:
    forget_all()
    yield
    forget_all()


def _refused(text: str, tmp_path: Path, environ: dict[str, str] | None = None) -> SpecError:
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        load_text(text, base_dir=tmp_path, environ=environ or {})
    assert time.monotonic() - started < 1.0
    return caught.value


@pytest.mark.parametrize(
    ("text", "field", "reference"),
    [
        ("version: 1\nclusters: {a: {bootstrap_servers: '${file:key.pem}'}}\nstate: {cluster: a}\n",
         "bootstrap_servers", "${file:key.pem}"),
        ("version: 1\nclusters: {a: {bootstrap_servers: ['x:1', '${env:S}']}}\nstate: {cluster: a}\n",
         "bootstrap_servers", "${env:S}"),
        ("version: 1\nclusters: {a: {bootstrap_servers: 'x:1,${env:S},y:2'}}\nstate: {cluster: a}\n",
         "bootstrap_servers", "x:1,${env:S},y:2"),
        ("version: 1\nclusters: {a: {bootstrap_servers: 'x:1'}}\nstate: {cluster: a, topic: '${env:S}x!'}\n",
         "state.topic", "${env:S}x!"),
        ("version: 1\nclusters: {a: {bootstrap_servers: 'x:1'}}\nstate: {cluster: a, topic: '${file:key.pem}'}\n",
         "state.topic", "${file:key.pem}"),
        ("version: 1\nclusters: {a: {bootstrap_servers: 'x:1'}}\nstate: {cluster: a}\n"
         "spark: {deploy: local, master: '${env:S}'}\n", "spark", "${env:S}"),
        ("version: 1\nclusters: {a: {bootstrap_servers: 'x:1'}}\nstate: {cluster: a}\n"
         "spark: {deploy: standalone, master: 'spark://m:7077', checkpoint_root: '${env:S}'}\n", "spark", "${env:S}"),
    ],
)  # fmt: skip
def test_an_invalid_per_environment_value_is_named_by_its_reference(
    tmp_path: Path, text: str, field: str, reference: str
) -> None:
    (tmp_path / "key.pem").write_text(KEY)
    error = _refused(text, tmp_path, {"S": f"{SENTINEL}\\q"})
    shown = "\n".join([str(error), *(repr(i) for i in error.issues)])
    assert SENTINEL not in shown and "MIIE" not in shown and "PRIVATE" not in shown
    assert any(reference in i.message and field in str(i) for i in error.issues), shown
    read = SENTINEL if "file:" in reference else f"{SENTINEL}\\q"  # a line of the file, or the variable
    assert SENTINEL not in scrub(f"later, anywhere: {read}")  # the scrubber knows it from now on


def test_a_valid_per_environment_value_is_shown_as_its_reference_and_used_as_its_value(tmp_path: Path) -> None:
    (tmp_path / "servers.txt").write_text("kafka-1.internal:9093,kafka-2.internal:9093\n")
    text = "version: 1\nclusters: {a: {bootstrap_servers: '${file:servers.txt}'}}\nstate: {cluster: a}\n"
    state = load_text(text, base_dir=tmp_path, environ={}).state
    assert state.clusters["a"].bootstrap_servers == "kafka-1.internal:9093,kafka-2.internal:9093"
    assert scrub("cannot reach kafka-2.internal:9093") == "cannot reach ${file:servers.txt}"
    assert scrub(scrub("kafka-1.internal:9093")) == "${file:servers.txt}"  # scrubbing twice changes nothing


@pytest.mark.parametrize("value", ["99999999999999999999999d", "1e999", "-.inf", ".nan", "9" * 400, "'1e999'"])
def test_a_duration_no_clock_holds_is_a_located_error(tmp_path: Path, value: str) -> None:
    text = BASE + f"flows:\n  - {{name: f, source: a, target: b, heartbeats: {{interval: {value}}}}}\n"
    error = _refused(text, tmp_path)
    (issue,) = error.issues
    assert issue.line == 7 and issue.path == ("flows", 0, "heartbeats", "interval")
    assert "duration" in issue.message


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 1000 + "]" * 1000,
        "a: " + "[" * 200_000,
        "a: " + "{b: " * 1000 + "}" * 1000,
        "".join(" " * i + "k:\n" for i in range(1000)),
        "- " * 1000 + "x",
    ],
    ids=["flow-lists", "unclosed", "flow-maps", "block-maps", "block-lists"],
)
def test_yaml_nested_a_thousand_deep_is_refused_quickly_with_its_line(tmp_path: Path, text: str) -> None:
    (issue,) = _refused(text, tmp_path).issues
    assert "nesting is deeper than 64 levels" in issue.message and issue.line >= 1 and issue.column > 1


def test_a_file_that_never_ends_is_refused_after_reading_the_limit() -> None:
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        load("/dev/zero")
    assert time.monotonic() - started < 1.0
    assert "kmirror reads at most 4 MiB" in str(caught.value) and "/dev/zero:" in str(caught.value)
    with pytest.raises(FileTooLarge) as too_large:
        read_capped("/dev/zero", 10)
    assert too_large.value.head == b"\0" * 10


def test_a_secret_file_is_read_up_to_a_limit(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * (1024 * 1024 + 1))
    text = "version: 1\nclusters: {a: {bootstrap_servers: '${file:big}'}}\nstate: {cluster: a}\n"
    (issue,) = _refused(text, tmp_path).issues
    assert "larger than 1024 KiB" in issue.message


def test_control_characters_in_a_name_are_escaped_in_the_message(tmp_path: Path) -> None:
    text = 'version: 1\nclusters: {a: {bootstrap_servers: "a:1"}}\nstate: {cluster: "\\e[31mred\\e]0;pwned\\a"}\n'
    shown = str(_refused(text, tmp_path))
    assert "\x1b" not in shown and "\x07" not in shown
    assert "unknown cluster '\\x1b[31mred\\x1b]0;pwned\\x07'" in shown


def test_terminal_safe_keeps_kmirrors_own_styles_only() -> None:
    assert terminal_safe("\x1b[31mred\x1b[0m\n\t") == "\x1b[31mred\x1b[0m\n\t"
    assert terminal_safe("\rspinner\x1b[K") == "\rspinner\x1b[K"
    assert terminal_safe("a\rb\x1b[8mhidden\x1b]0;t\x07\u202e") == "a\\x0db\\x1b[8mhidden\\x1b]0;t\\x07\\u202e"
    assert terminal_safe("\x1b[31mred", styles=False) == "\\x1b[31mred"


@pytest.mark.parametrize("location", ["../" * 30 + "etc/shadow", "/etc/shadow", "link.pem"])
def test_a_tls_location_outside_the_allowed_folders_is_refused(tmp_path: Path, location: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "link.pem").symlink_to("/etc/shadow")
    cluster = ClusterSpec(bootstrap_servers="k:9093", client={"ssl.ca.location": location})
    for build in (kafka_client_config, java_client_properties):
        with pytest.raises(SecretResolutionError, match=r"ssl\.ca\.location: .*outside the folders"):
            build(cluster, base_dir=repo, environ={})
    allowed = kafka_client_config(cluster, base_dir=repo, environ={"KMIRROR_FILE_ROOTS": "/etc"})
    assert allowed["ssl.ca.location"].endswith(location.rsplit("/", 1)[-1])


def test_a_tls_location_below_the_config_folder_is_fine(tmp_path: Path) -> None:
    cluster = ClusterSpec(bootstrap_servers="k:9093", client={"ssl.ca.location": "tls/ca.pem"})
    assert kafka_client_config(cluster, base_dir=tmp_path, environ={})["ssl.ca.location"] == str(
        tmp_path / "tls/ca.pem"
    )


def test_the_jobs_log_filter_escapes_control_characters_in_names() -> None:
    import io
    import logging

    from reconciler.spec.redaction import scrubbing_log_filter

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(scrubbing_log_filter())
    logger = logging.getLogger("kmirror.test.untrusted")
    logger.addHandler(handler)
    try:
        logger.warning("group %s has no offsets", "evil\x1b]0;pwned\x07\x1b[2K")
    finally:
        logger.removeHandler(handler)
    assert out.getvalue() == "group evil\\x1b]0;pwned\\x07\\x1b[2K has no offsets\n"


def test_a_pem_file_the_job_reads_inline_is_read_up_to_a_limit(tmp_path: Path) -> None:
    (tmp_path / "client.pem").write_text("-----BEGIN CERTIFICATE-----\n" + "A" * (1024 * 1024) + "\n")
    (tmp_path / "client.key").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    cluster = ClusterSpec(
        bootstrap_servers="k:9093",
        client={"ssl.certificate.location": "client.pem", "ssl.key.location": "client.key"},
    )
    with pytest.raises(SecretResolutionError, match=r"cannot read .*client\.pem: larger than 1 MiB"):
        java_client_properties(cluster, base_dir=tmp_path, environ={})
