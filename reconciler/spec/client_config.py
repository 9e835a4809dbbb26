"""Turn a cluster of the desired state into a client configuration for each of kmirror's two client stacks.

`clusters.<name>.client` takes the keys users already know from either stack; `kafka_client_config` makes a
librdkafka (confluent-kafka) configuration of them for the CLI, `java_client_properties` a Java client
configuration for the Spark job and its interceptor, and each gets the equivalent of what the other was given:

written -> what librdkafka gets; what Java gets:
- ssl.ca.location (PEM) -> itself; ssl.truststore.location with type PEM.
- ssl.truststore.location, type PEM -> ssl.ca.location; itself. JKS/PKCS12: an error unless ssl.ca.location too.
- ssl.certificate.location + ssl.key.location (PEM) -> themselves; ssl.keystore.type PEM with the chain and the
  (PKCS#8) key read inline (ssl.keystore.certificate.chain, ssl.keystore.key).
- ssl.keystore.location, PKCS12 or no type -> itself; itself with type PKCS12. Type PEM (key and chain in one
  file) -> ssl.certificate.location and ssl.key.location; itself. JKS: an error unless the PEM pair too.
- ssl.ca.pem / ssl.certificate.pem / ssl.key.pem <-> ssl.truststore.certificates / ssl.keystore.certificate.chain
  / ssl.keystore.key.
- ssl.endpoint.identification.algorithm: librdkafka's "none" is Java's "" (and back).
- sasl.username + sasl.password (PLAIN, SCRAM-SHA-*) <-> a Plain/Scram `sasl.jaas.config` line.
- OAUTHBEARER with sasl.oauthbearer.method oidc, .client.id, .client.secret, .scope, .token.endpoint.url ->
  themselves; an OAuthBearerLoginModule line with clientId/clientSecret/scope and the
  OAuthBearerLoginCallbackHandler (and back from such a line).
- OAUTHBEARER unsecured (for tests): sasl.oauthbearer.config "principal=NAME" -> itself with
  enable.sasl.oauthbearer.unsecure.jwt; an OAuthBearerLoginModule line with unsecuredLoginStringClaim_sub.
- sasl.mechanism AWS_MSK_IAM (optionally an IAMLoginModule line with awsProfileName or awsRoleArn) -> OAUTHBEARER
  with an `oauth_cb` from aws-msk-iam-sasl-signer-python (the `aws` extra); itself with the IAMLoginModule and
  IAMClientCallbackHandler (the aws-msk-iam-auth jar on the job's classpath).

A relative `*.location` is taken from the desired-state file's folder, as `${file:..}` is, and every location must
lie below the folders a `${file:..}` may read (else `SecretResolutionError`). What cannot be
translated (a JKS truststore has no librdkafka equivalent) is found at load time by `client_problems`, located at
the key, with the fix; what needs the files (a key Java cannot read) is reported when the client is built.

The returned configurations hold resolved secrets (and, for Java, key material): hand them to a client and drop
them; never log, print or store them. Every secret read is taught to the scrubber (`redaction.remember`).

No I/O except reading `${file:..}` secrets and the PEM files Java needs inline, at call time.
Must not: import a Kafka client or the AWS signer at import time (the signer is imported when a token is needed).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.issues import SecretResolutionError
from reconciler.spec.models import ClusterSpec
from reconciler.spec.redaction import remember
from reconciler.spec.secrets import MAX_SECRET_FILE_BYTES, SecretRef, outside_allowed_roots, resolve_properties

Resolved = dict[str, str | int | float | bool]
#: A librdkafka configuration as confluent-kafka takes it: property values, references resolved (in memory only),
#: and with AWS_MSK_IAM an `oauth_cb` that returns (token, expiry in seconds).
ClientConfig = dict[str, str | int | float | bool | Callable[[str], tuple[str, float]]]

_JAAS_FIELD = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_HEAD = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b")
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MSK_IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
MSK_IAM_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
MSK_IAM_JAR = "software.amazon.msk:aws-msk-iam-auth:2.3.2"
_MSK_REGION = re.compile(r"\.kafka(?:-serverless)?\.([a-z]{2}(?:-gov)?-[a-z]+-\d)\.amazonaws\.com")

_JAVA_KEYSTORE_TYPES = ("JKS", "PKCS12", "JCEKS")
# librdkafka-only keys: never handed to Java (it would warn about each unknown one, or misread it).
_LIBRDKAFKA_ONLY = frozenset(
    {
        "sasl.username",
        "sasl.password",
        "sasl.mechanisms",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.ca.pem",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "enable.ssl.certificate.verification",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "enable.sasl.oauthbearer.unsecure.jwt",
    }
)
# Java-only keys: never handed to librdkafka (it refuses unknown keys).
_JAVA_ONLY = frozenset(
    {
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "sasl.login.class",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.provider",
        "ssl.engine.factory.class",
    }
)


@dataclass(frozen=True)
class ClientProblem:
    """A client setting that cannot work on one of the two stacks: the key, what is wrong, what to do."""

    key: str
    message: str
    hint: str


def client_problems(client: Mapping[str, object], bootstrap_servers: str = "") -> list[ClientProblem]:
    """What in a `client:` map cannot be translated for both stacks. Looks only at keys and plain values."""
    problems: list[ClientProblem] = []
    get = _getter(client)
    truststore, truststore_type = get("ssl.truststore.location"), (get("ssl.truststore.type") or "JKS").upper()
    if truststore and truststore_type != "PEM" and not (get("ssl.ca.location") or get("ssl.ca.pem")):
        problems.append(
            ClientProblem(
                "ssl.truststore.location",
                f"a {truststore_type} truststore cannot be read by librdkafka, the client kmirror's CLI uses",
                "export the CA certificate as PEM (keytool -exportcert -rfc -alias CA -keystore "
                "truststore.jks -file ca.pem) and set ssl.ca.location: ca.pem instead (the Spark job gets it as "
                "a PEM truststore), or add ssl.ca.location beside it",
            )
        )
    keystore, keystore_type = get("ssl.keystore.location"), (get("ssl.keystore.type") or "PKCS12").upper()
    has_pem_pair = bool(get("ssl.certificate.location") and get("ssl.key.location"))
    if keystore and keystore_type in ("JKS", "JCEKS") and not has_pem_pair:
        problems.append(
            ClientProblem(
                "ssl.keystore.location",
                f"a {keystore_type} keystore cannot be read by librdkafka, the client kmirror's CLI uses",
                "convert it to PKCS12 (keytool -importkeystore -srckeystore keystore.jks -destkeystore "
                "keystore.p12 -deststoretype PKCS12) and set ssl.keystore.type: PKCS12, or give the certificate and "
                "key as PEM files in ssl.certificate.location and ssl.key.location",
            )
        )
    for one, other in (
        ("ssl.certificate.location", "ssl.key.location"),
        ("ssl.key.location", "ssl.certificate.location"),
    ):
        if get(one) and not get(other) and not keystore:
            problems.append(
                ClientProblem(one, f"{one} is set without {other}", f"set {other} too: a client certificate needs both")
            )
    if get("sasl.mechanism") and get("sasl.mechanisms"):
        problems.append(
            ClientProblem("sasl.mechanisms", "both sasl.mechanism and sasl.mechanisms are set", "keep sasl.mechanism")
        )
    mechanism = _mechanism(client)
    if mechanism == "OAUTHBEARER" and (get("sasl.oauthbearer.method") or "").lower() == "oidc":
        for key in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.token.endpoint.url"):
            if not get(key):
                problems.append(
                    ClientProblem(key, f"OAUTHBEARER with method oidc needs {key}", f"set {key} (from your provider)")
                )
        if "sasl.oauthbearer.client.secret" not in client:
            problems.append(
                ClientProblem(
                    "sasl.oauthbearer.client.secret",
                    "OAUTHBEARER with method oidc needs sasl.oauthbearer.client.secret",
                    "set it to a reference: ${env:NAME} or ${file:PATH}",
                )
            )
    if mechanism == "AWS_MSK_IAM":
        protocol = (get("security.protocol") or "").upper()
        if protocol != "SASL_SSL":
            problems.append(
                ClientProblem("security.protocol", "AWS_MSK_IAM needs security.protocol: SASL_SSL", "set it")
            )
        if bootstrap_servers and msk_region(bootstrap_servers) is None:
            problems.append(
                ClientProblem(
                    "sasl.mechanism",
                    "cannot tell the AWS region from bootstrap_servers (expected an MSK host name such as "
                    "b-1.NAME.abc123.c2.kafka.us-east-1.amazonaws.com)",
                    "use the MSK bootstrap broker names, not IP addresses or aliases",
                )
            )
    return problems


def kafka_client_config(
    cluster: ClusterSpec,
    *,
    alias: str = "cluster",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, str | int | float | bool] | None = None,
) -> ClientConfig:
    """The librdkafka configuration: `{"bootstrap.servers": ..., **client}` translated, references resolved.

    Raises `SecretResolutionError` naming each `clusters.<alias>.client.<key>` that could not be resolved.
    `overrides` (e.g. a client.id or group.id chosen by the caller) win over the spec's client properties.
    With AWS_MSK_IAM the configuration holds an `oauth_cb` callable (confluent-kafka calls it for tokens).
    """
    resolved = _locations_absolute(
        resolve_properties(cluster.client, context=f"clusters.{alias}.client", base_dir=base_dir, environ=environ),
        base_dir,
        environ,
        alias,
    )
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers}
    jaas = _jaas(resolved.get("sasl.jaas.config"))
    mechanism = _mechanism(resolved)
    if jaas is not None and "sasl.username" not in resolved:  # a Plain/Scram line's username and password
        for key in ("username", "password"):
            if key in jaas.options:
                config[f"sasl.{key}"] = jaas.options[key]
    config.update({k: v for k, v in resolved.items() if k not in _JAVA_ONLY})
    if "sasl.mechanisms" in config:
        config["sasl.mechanism"] = config.pop("sasl.mechanisms")
    _librdkafka_tls(resolved, config)
    if mechanism == "OAUTHBEARER":
        _librdkafka_oauth(resolved, jaas, config)
    elif mechanism == "AWS_MSK_IAM":
        config["sasl.mechanism"] = "OAUTHBEARER"
        options = jaas.options if jaas is not None else {}
        config["oauth_cb"] = msk_iam_token_callback(
            msk_region(cluster.bootstrap_servers) or "", options.get("awsProfileName"), options.get("awsRoleArn")
        )
    if overrides:
        config.update(overrides)
    return config


def java_client_properties(
    cluster: ClusterSpec,
    *,
    alias: str = "cluster",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The same cluster as Java client properties (for Spark's `kafka.` options and the interceptor), as strings.

    Raises `SecretResolutionError` for a reference or a PEM file that cannot be read or used.
    """
    resolved = _locations_absolute(
        resolve_properties(cluster.client, context=f"clusters.{alias}.client", base_dir=base_dir, environ=environ),
        base_dir,
        environ,
        alias,
    )
    props = {"bootstrap.servers": cluster.bootstrap_servers}
    props.update({k: _java_string(v) for k, v in resolved.items() if k not in _LIBRDKAFKA_ONLY})
    mechanism = _mechanism(resolved)
    if mechanism:
        props["sasl.mechanism"] = mechanism
    _java_tls(resolved, props, alias)
    username, password = resolved.get("sasl.username"), resolved.get("sasl.password")
    if "sasl.jaas.config" not in props and mechanism == "OAUTHBEARER":
        _java_oauth(resolved, props)
    elif mechanism == "AWS_MSK_IAM":
        props.setdefault("sasl.jaas.config", f"{MSK_IAM_MODULE} required;")
        props.setdefault("sasl.client.callback.handler.class", MSK_IAM_HANDLER)
    elif "sasl.jaas.config" not in props and username is not None and password is not None:
        module = _JAAS_MODULES.get(mechanism or "PLAIN", _JAAS_MODULES["PLAIN"])
        props["sasl.jaas.config"] = _jaas_line(module, {"username": username, "password": password})
    return props


# -- TLS ---------------------------------------------------------------------------------------------------------


def _librdkafka_tls(resolved: Resolved, config: dict[str, Any]) -> None:
    truststore = resolved.get("ssl.truststore.location")
    if truststore and str(resolved.get("ssl.truststore.type", "")).upper() == "PEM":
        config.setdefault("ssl.ca.location", truststore)
    if "ssl.truststore.certificates" in resolved:
        config.setdefault("ssl.ca.pem", resolved["ssl.truststore.certificates"])
    keystore_type = str(resolved.get("ssl.keystore.type", "PKCS12")).upper()
    keystore = config.get("ssl.keystore.location")
    if keystore is not None and ("ssl.certificate.location" in config or keystore_type not in ("PKCS12", "PEM")):
        config.pop("ssl.keystore.location", None)  # the PEM pair serves librdkafka; the keystore serves Java
        config.pop("ssl.keystore.password", None)
    elif keystore is not None and keystore_type == "PEM":
        config.pop("ssl.keystore.location")
        config.pop("ssl.keystore.password", None)
        config.setdefault("ssl.certificate.location", keystore)
        config.setdefault("ssl.key.location", keystore)
    elif keystore is not None:
        _refuse_jks(str(keystore), "ssl.keystore.location")
    if "ssl.keystore.certificate.chain" in resolved:
        config.setdefault("ssl.certificate.pem", resolved["ssl.keystore.certificate.chain"])
    if "ssl.keystore.key" in resolved:
        config.setdefault("ssl.key.pem", resolved["ssl.keystore.key"])
    if config.get("ssl.endpoint.identification.algorithm") == "":
        config["ssl.endpoint.identification.algorithm"] = "none"


def _java_tls(resolved: Resolved, props: dict[str, str], alias: str) -> None:
    if "ssl.truststore.location" not in props and "ssl.truststore.certificates" not in props:
        if "ssl.ca.location" in resolved:
            props["ssl.truststore.location"] = str(resolved["ssl.ca.location"])
            props["ssl.truststore.type"] = "PEM"
        elif "ssl.ca.pem" in resolved:
            props["ssl.truststore.certificates"] = str(resolved["ssl.ca.pem"])
            props["ssl.truststore.type"] = "PEM"
    if "ssl.keystore.location" in props:
        props.setdefault("ssl.keystore.type", "PKCS12")
    elif "ssl.certificate.location" in resolved and "ssl.key.location" in resolved:
        chain = _read_pem(str(resolved["ssl.certificate.location"]), alias, "ssl.certificate.location")
        key = _read_pem(str(resolved["ssl.key.location"]), alias, "ssl.key.location")
        _require_pkcs8(key, alias, str(resolved["ssl.key.location"]))
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key})
    elif "ssl.certificate.pem" in resolved and "ssl.key.pem" in resolved:
        key = str(resolved["ssl.key.pem"])
        _require_pkcs8(key, alias, "ssl.key.pem")
        props.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": str(resolved["ssl.certificate.pem"]),
                "ssl.keystore.key": key,
            }
        )
    if props.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        props["ssl.endpoint.identification.algorithm"] = ""


def _locations_absolute(
    resolved: Resolved, base_dir: Path | None, environ: Mapping[str, str] | None, alias: str
) -> Resolved:
    """Relative `*.location`s from the desired-state file's folder; each must lie below the folders a `${file:..}`
    may read (`secrets.allowed_file_roots`): a branch cannot hand `../../etc/shadow` to librdkafka or Java."""
    out = dict(resolved)
    problems = []
    for key, value in resolved.items():
        if not (key.endswith(".location") and isinstance(value, str) and value):
            continue
        path = Path(value).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
            out[key] = str(path)
        outside = outside_allowed_roots(path, base_dir, environ)
        if outside:
            problems.append(f"clusters.{alias}.client.{key}: {outside}")
    if problems:
        raise SecretResolutionError("\n".join(problems))
    return out


def _read_pem(path: str, alias: str, key: str) -> str:
    try:
        text = read_capped(path, MAX_SECRET_FILE_BYTES).decode("ascii")
    except (OSError, UnicodeDecodeError, FileTooLarge) as exc:
        reason = getattr(exc, "strerror", None) or ("larger than 1 MiB" if isinstance(exc, FileTooLarge) else "")
        reason = reason or type(exc).__name__
        raise SecretResolutionError(
            f"clusters.{alias}.client.{key}: cannot read {path}: {reason} (the Spark job reads it too: check the "
            "path and that the file is PEM text)"
        ) from None
    remember(text)
    return text


def _require_pkcs8(key: str, alias: str, where: str) -> None:
    if "BEGIN RSA PRIVATE KEY" in key or "BEGIN EC PRIVATE KEY" in key or "Proc-Type: 4,ENCRYPTED" in key:
        raise SecretResolutionError(
            f"clusters.{alias}.client: the key in {where} is in the traditional OpenSSL format, which the Java "
            "client (the Spark job) cannot read; convert it to PKCS#8: openssl pkcs8 -topk8 -in key.pem -out "
            "key.pk8.pem (add -nocrypt for a key without ssl.key.password)"
        )


def _refuse_jks(path: str, key: str) -> None:
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError:
        return  # librdkafka reports a missing file itself
    if magic == b"\xfe\xed\xfe\xed":
        raise SecretResolutionError(
            f"{key} {path} is a JKS keystore, which librdkafka cannot read: convert it to PKCS12 (keytool "
            "-importkeystore -srckeystore keystore.jks -destkeystore keystore.p12 -deststoretype PKCS12)"
        )


# -- SASL --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Jaas:
    module: str
    options: dict[str, str]


def _jaas(value: object) -> _Jaas | None:
    if not isinstance(value, str):
        return None
    head = _JAAS_HEAD.match(value)
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_FIELD.findall(value)}
    return _Jaas(head.group(1) if head else "", options)


def _mechanism(client: Mapping[str, object]) -> str:
    value = client.get("sasl.mechanism", client.get("sasl.mechanisms", ""))
    return str(value).strip().upper() if not isinstance(value, SecretRef) else ""


def _librdkafka_oauth(resolved: Resolved, jaas: _Jaas | None, config: dict[str, Any]) -> None:
    options = jaas.options if jaas is not None and jaas.module.endswith("OAuthBearerLoginModule") else {}
    if "clientId" in options:
        config.setdefault("sasl.oauthbearer.method", "oidc")
        config.setdefault("sasl.oauthbearer.client.id", options["clientId"])
        if "clientSecret" in options:
            config.setdefault("sasl.oauthbearer.client.secret", options["clientSecret"])
        if "scope" in options:
            config.setdefault("sasl.oauthbearer.scope", options["scope"])
    elif "unsecuredLoginStringClaim_sub" in options:
        config.setdefault("sasl.oauthbearer.config", f"principal={options['unsecuredLoginStringClaim_sub']}")
    if str(config.get("sasl.oauthbearer.method", "default")).lower() != "oidc":
        config.setdefault("enable.sasl.oauthbearer.unsecure.jwt", True)


def _java_oauth(resolved: Resolved, props: dict[str, str]) -> None:
    if str(resolved.get("sasl.oauthbearer.method", "default")).lower() == "oidc":
        options = {
            "clientId": resolved.get("sasl.oauthbearer.client.id", ""),
            "clientSecret": resolved.get("sasl.oauthbearer.client.secret", ""),
        }
        if "sasl.oauthbearer.scope" in resolved:
            options["scope"] = resolved["sasl.oauthbearer.scope"]
        props["sasl.jaas.config"] = _jaas_line(OAUTH_MODULE, options)
        props.setdefault("sasl.login.callback.handler.class", OAUTH_LOGIN_HANDLER)
        return
    config = str(resolved.get("sasl.oauthbearer.config", ""))
    principal = dict(part.split("=", 1) for part in config.split() if "=" in part).get("principal", "kmirror")
    props["sasl.jaas.config"] = _jaas_line(OAUTH_MODULE, {"unsecuredLoginStringClaim_sub": principal})


def _jaas_line(module: str, options: Mapping[str, str | int | float | bool]) -> str:
    fields = " ".join(f'{k}="{_jaas_escape(v)}"' for k, v in options.items())
    return f"{module} required {fields};" if fields else f"{module} required;"


def msk_region(bootstrap_servers: str) -> str | None:
    """The AWS region of an MSK cluster, from its broker host names."""
    match = _MSK_REGION.search(bootstrap_servers)
    return match.group(1) if match else None


def msk_iam_token_callback(
    region: str, profile: str | None = None, role_arn: str | None = None
) -> Callable[[str], tuple[str, float]]:
    """confluent-kafka's `oauth_cb` for MSK IAM: a signed token from aws-msk-iam-sasl-signer-python (the `aws`
    extra), with the default credential chain, a named profile, or an assumed role, as the Java plugin would."""

    def token(_oauthbearer_config: str) -> tuple[str, float]:
        try:
            from aws_msk_iam_sasl_signer import MSKAuthTokenProvider  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise SecretResolutionError(
                "AWS_MSK_IAM needs aws-msk-iam-sasl-signer-python: pip install 'kmirror[aws]'"
            ) from None
        if role_arn:
            value, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_role_arn(region, role_arn)
        elif profile:
            value, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_profile(region, profile)
        else:
            value, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
        remember(value)
        return str(value), float(expiry_ms) / 1000 if expiry_ms else time.time() + 900

    return token


def _getter(client: Mapping[str, object]) -> Callable[[str], str]:
    def get(key: str) -> str:
        value = client.get(key)
        if value is None:
            return ""
        return str(value) if not isinstance(value, SecretRef) else "<reference>"

    return get


def _jaas_escape(value: str | int | float | bool) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _java_string(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
