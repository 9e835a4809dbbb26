"""One `client:` map, two client stacks: TLS, mTLS and each SASL mechanism translated so that librdkafka (the CLI)
and the Java client (the Spark job, the interceptor) get equivalent settings; what cannot be translated is a
located load-time error that names the fix."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from reconciler.importers.mm2_config import import_properties
from reconciler.spec import ClusterSpec, SpecError, load_text
from reconciler.spec.client_config import (
    MSK_IAM_HANDLER,
    OAUTH_LOGIN_HANDLER,
    client_problems,
    java_client_properties,
    kafka_client_config,
    msk_region,
)
from reconciler.spec.issues import SecretResolutionError

pytestmark = pytest.mark.unit

CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
PKCS8 = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
PKCS1 = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"


def cluster(bootstrap: str = "k:9093", **client: object) -> ClusterSpec:
    return ClusterSpec.model_validate({"bootstrap_servers": bootstrap, "client": client})


def both(spec: ClusterSpec, base: Path | None = None, env: dict[str, str] | None = None) -> tuple[Any, Any]:
    # Locations must lie below the allowed folders (tests/unit/spec/test_untrusted_input.py); these tests are
    # about translation, with absolute paths such as /etc/kafka/ca.pem, so every folder is allowed here.
    environ = {"KMIRROR_FILE_ROOTS": "/", **(env or {})}
    return kafka_client_config(spec, base_dir=base, environ=environ), java_client_properties(
        spec, base_dir=base, environ=environ
    )


def test_librdkafka_pem_keys_become_a_java_pem_truststore_and_keystore(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text(CERT)
    (tmp_path / "client.pem").write_text(CERT)
    (tmp_path / "client.key").write_text(PKCS8)
    spec = cluster(
        **{
            "security.protocol": "SSL",
            "ssl.ca.location": "ca.pem",  # relative: from the desired-state file's folder
            "ssl.certificate.location": "client.pem",
            "ssl.key.location": "client.key",
            "ssl.key.password": "${env:KEYPW}",
        }
    )
    rd, java = both(spec, tmp_path, {"KEYPW": "kp-123456"})
    assert rd == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SSL",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.certificate.location": str(tmp_path / "client.pem"),
        "ssl.key.location": str(tmp_path / "client.key"),
        "ssl.key.password": "kp-123456",
    }
    assert java == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SSL",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": CERT,
        "ssl.keystore.key": PKCS8,
        "ssl.key.password": "kp-123456",
    }


def test_java_keystores_serve_java_and_pkcs12_serves_librdkafka(tmp_path: Path) -> None:
    spec = cluster(
        **{
            "security.protocol": "SSL",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.keystore.location": "/etc/kafka/client.p12",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": "${env:KSPW}",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    rd, java = both(spec, tmp_path, {"KSPW": "ks-123456"})
    assert rd == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.keystore.location": "/etc/kafka/client.p12",
        "ssl.keystore.password": "ks-123456",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert java["ssl.keystore.location"] == "/etc/kafka/client.p12" and java["ssl.keystore.type"] == "PKCS12"
    assert java["ssl.truststore.type"] == "PEM" and java["ssl.endpoint.identification.algorithm"] == ""


def test_a_java_pem_keystore_file_is_both_librdkafka_keys() -> None:
    spec = cluster(**{"ssl.keystore.location": "/k/both.pem", "ssl.keystore.type": "PEM", "ssl.ca.location": "/ca"})
    rd, java = both(spec)
    assert rd["ssl.certificate.location"] == rd["ssl.key.location"] == "/k/both.pem"
    assert "ssl.keystore.location" not in rd and java["ssl.keystore.location"] == "/k/both.pem"


def test_inline_pem_values_cross_over() -> None:
    spec = cluster(**{"ssl.ca.pem": CERT, "ssl.certificate.pem": CERT, "ssl.key.pem": "${env:KEY}"})
    rd, java = both(spec, env={"KEY": PKCS8})
    assert rd["ssl.key.pem"] == PKCS8
    assert java["ssl.truststore.certificates"] == CERT and java["ssl.keystore.key"] == PKCS8
    assert java["ssl.keystore.certificate.chain"] == CERT and java["ssl.keystore.type"] == "PEM"
    assert not {k for k in java if k.endswith(".pem")}


def test_a_key_java_cannot_read_is_an_error_naming_the_conversion(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text(CERT)
    (tmp_path / "k.pem").write_text(PKCS1)
    spec = cluster(**{"ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem"})
    with pytest.raises(SecretResolutionError, match="openssl pkcs8 -topk8"):
        java_client_properties(spec, base_dir=tmp_path)
    assert kafka_client_config(spec, base_dir=tmp_path)["ssl.key.location"] == str(tmp_path / "k.pem")


def test_an_untyped_keystore_that_is_really_jks_is_refused_for_librdkafka(tmp_path: Path) -> None:
    (tmp_path / "k.jks").write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 20)
    with pytest.raises(SecretResolutionError, match="JKS keystore, which librdkafka cannot read"):
        kafka_client_config(cluster(**{"ssl.keystore.location": "k.jks"}), base_dir=tmp_path)


UNTRANSLATABLE = [
    ({"ssl.truststore.location": "/t.jks"}, "ssl.truststore.location", "keytool -exportcert -rfc"),
    (
        {"ssl.truststore.location": "/t.p12", "ssl.truststore.type": "PKCS12"},
        "ssl.truststore.location",
        "set ssl.ca.location",
    ),
    ({"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}, "ssl.keystore.location", "-deststoretype PKCS12"),
    ({"ssl.certificate.location": "/c.pem"}, "ssl.certificate.location", "set ssl.key.location too"),
    (
        {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "x"},
        "sasl.oauthbearer.token.endpoint.url",
        "from your provider",
    ),
    ({"sasl.mechanism": "AWS_MSK_IAM", "security.protocol": "SSL"}, "security.protocol", "SASL_SSL"),
]


@pytest.mark.parametrize(("client", "key", "fix"), UNTRANSLATABLE)
def test_what_cannot_be_translated_is_a_located_load_error(client: dict[str, str], key: str, fix: str) -> None:
    lines = "".join(f'      {k}: "{v}"\n' for k, v in client.items())
    text = f'version: 1\nclusters:\n  a:\n    bootstrap_servers: "a:9093"\n    client:\n{lines}state: {{cluster: a}}\n'
    with pytest.raises(SpecError) as caught:
        load_text(text, file="kmirror.yaml")
    errors = [str(i) for i in caught.value.errors if i.path == ("clusters", "a", "client", key)]
    assert errors, str(caught.value)
    line = 6 + list(client).index(key) if key in client else 6  # a missing key: where the client map starts
    assert errors[0].startswith(f"kmirror.yaml:{line}:") and fix in errors[0], errors


def test_a_jks_truststore_next_to_a_pem_ca_is_fine() -> None:
    assert client_problems({"ssl.truststore.location": "/t.jks", "ssl.ca.location": "/ca.pem"}) == []


def test_scram_over_tls_on_both_stacks() -> None:
    spec = cluster(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "${env:PW}",
            "ssl.ca.location": "/ca.pem",
        }
    )
    rd, java = both(spec, env={"PW": "pw-123456"})
    assert rd["sasl.password"] == "pw-123456" and rd["ssl.ca.location"] == "/ca.pem"
    assert java["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="pw-123456";'
    )
    assert java["ssl.truststore.location"] == "/ca.pem" and "sasl.password" not in java


def test_oauthbearer_oidc_client_credentials_on_both_stacks() -> None:
    spec = cluster(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "kmirror",
            "sasl.oauthbearer.client.secret": "${env:CS}",
            "sasl.oauthbearer.scope": "kafka",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        }
    )
    rd, java = both(spec, env={"CS": "cs-123456"})
    assert rd["sasl.oauthbearer.client.secret"] == "cs-123456" and rd["sasl.oauthbearer.method"] == "oidc"
    assert "enable.sasl.oauthbearer.unsecure.jwt" not in rd
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="kmirror" clientSecret="cs-123456" scope="kafka";'
    )
    assert java["sasl.login.callback.handler.class"] == OAUTH_LOGIN_HANDLER
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert not {k for k in java if k.startswith("sasl.oauthbearer.") and k != "sasl.oauthbearer.token.endpoint.url"}


def test_oauthbearer_from_a_java_jaas_line_reaches_librdkafka() -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="kmirror" clientSecret="${env:CS}";'
    )
    spec = cluster(
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": jaas,
            "sasl.login.callback.handler.class": OAUTH_LOGIN_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        }
    )
    rd, java = both(spec, env={"CS": "cs-123456"})
    assert rd["sasl.oauthbearer.method"] == "oidc" and rd["sasl.oauthbearer.client.secret"] == "cs-123456"
    assert "sasl.jaas.config" not in rd and "sasl.login.callback.handler.class" not in rd
    assert java["sasl.jaas.config"].endswith('clientSecret="cs-123456";')


def test_oauthbearer_unsecured_jwt_for_tests_on_both_stacks() -> None:
    spec = cluster(**{"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=admin"})
    rd, java = both(spec)
    assert rd["enable.sasl.oauthbearer.unsecure.jwt"] is True and rd["sasl.oauthbearer.config"] == "principal=admin"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="admin";'
    )
    jaas_only = cluster(
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="admin";',
        }
    )
    assert kafka_client_config(jaas_only)["sasl.oauthbearer.config"] == "principal=admin"


MSK = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098,b-2.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"


def test_aws_msk_iam_java_gets_the_plugin_and_librdkafka_a_signed_oauth_token(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []

    class Provider:
        @staticmethod
        def generate_auth_token(region: str) -> tuple[str, int]:
            calls.append(("default", region))
            return "signed-token-1234", 1_900_000_000_000

        @staticmethod
        def generate_auth_token_from_profile(region: str, profile: str) -> tuple[str, int]:
            calls.append(("profile", region, profile))
            return "signed-token-5678", 1_900_000_000_000

    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", types.SimpleNamespace(MSKAuthTokenProvider=Provider))
    spec = cluster(MSK, **{"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM"})
    rd, java = both(spec)
    assert rd["sasl.mechanism"] == "OAUTHBEARER" and "sasl.jaas.config" not in rd
    assert rd["oauth_cb"]("") == ("signed-token-1234", 1_900_000_000.0)
    assert java["sasl.mechanism"] == "AWS_MSK_IAM"
    assert java["sasl.jaas.config"] == "software.amazon.msk.auth.iam.IAMLoginModule required;"
    assert java["sasl.client.callback.handler.class"] == MSK_IAM_HANDLER
    profiled = cluster(
        MSK,
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "AWS_MSK_IAM",
            "sasl.jaas.config": 'software.amazon.msk.auth.iam.IAMLoginModule required awsProfileName="ops";',
        },
    )
    kafka_client_config(profiled)["oauth_cb"]("")
    assert calls == [("default", "eu-west-1"), ("profile", "eu-west-1", "ops")]
    assert msk_region("10.0.0.1:9098") is None
    assert client_problems({"sasl.mechanism": "AWS_MSK_IAM", "security.protocol": "SASL_SSL"}, "10.0.0.1:9098")


def test_an_imported_mm2_config_with_java_keystores_loads_and_says_how_to_make_the_pem_files() -> None:
    text = """clusters = a, b
a.bootstrap.servers = a:9093
b.bootstrap.servers = b:9093
a.security.protocol = SSL
a.ssl.truststore.location = /etc/kafka/truststore.jks
a.ssl.truststore.password = changeit
a.ssl.keystore.location = /etc/kafka/keystore.jks
a.ssl.keystore.password = changeit
a->b.enabled = true
a->b.topics = orders.*
"""
    result = import_properties(text)
    client = load_text(result.yaml_text).state.clusters["a"].client
    assert client["ssl.ca.location"] == "/etc/kafka/truststore-ca.pem"
    assert client["ssl.keystore.location"] == "/etc/kafka/keystore.p12" and client["ssl.keystore.type"] == "PKCS12"
    notes = "\n".join(result.notes)
    assert "keytool -exportcert -rfc" in notes and "-deststoretype PKCS12" in notes
    assert "changeit" not in result.yaml_text
