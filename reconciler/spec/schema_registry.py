"""A cluster's schema registry in the desired state (`clusters.<name>.schema_registry`), and how to reach it.

`SchemaRegistrySpec` is the Confluent REST API's root (`url`; Apicurio's compatible API is `<root>/apis/ccompat/v7`)
with the same kinds of credentials as a Kafka client: HTTP basic auth (`basic_auth: {username, password}`), a bearer
token (`bearer_token`), and TLS files (`tls: {ca_location, certificate_location, key_location}`, PEM; relative paths
from the desired-state file's folder, as a client's `ssl.*.location`). Secrets are `${env:..}`/`${file:..}`
references (`SecretRef`), resolved only when a request is made; a literal password or token is a validation error.

`registry_problems` is the cross-field check `validate.py` reports with locations. `connection` turns a spec into a
`RegistryConnection` (resolved secrets: hand it to the adapter and drop it).

Pure apart from resolving the references at `connection()`. Must not: print, log or store a resolved secret, or
open a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reconciler.spec.issues import SecretResolutionError
from reconciler.spec.secrets import ConfigValue, SecretRef, outside_allowed_roots, resolve_value


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class BasicAuthSpec(_Model):
    username: ConfigValue = Field(description="The registry user (may be a ${env:..} reference).")
    password: ConfigValue = Field(description="Its password: a ${env:NAME} or ${file:PATH} reference.")


class RegistryTlsSpec(_Model):
    ca_location: str | None = Field(default=None, description="PEM file of the CAs to trust (default: the system's).")
    certificate_location: str | None = Field(default=None, description="PEM client certificate (mutual TLS).")
    key_location: str | None = Field(default=None, description="Its PEM private key (unencrypted).")


class SchemaRegistrySpec(_Model):
    """A Confluent-compatible schema registry that holds the schemas of this cluster's records."""

    url: str = Field(
        description="Root of the registry's Confluent REST API, e.g. 'https://sr.example.com:8081' or, for Apicurio, "
        "'http://host:8080/apis/ccompat/v7'."
    )
    basic_auth: BasicAuthSpec | None = Field(default=None, description="HTTP basic authentication.")
    bearer_token: ConfigValue | None = Field(default=None, description="A bearer token: a ${env:..}/${file:..} ref.")
    tls: RegistryTlsSpec | None = Field(default=None, description="TLS files for an https url.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or len(value.split("://", 1)[1].strip("/")) == 0:
            raise ValueError(f"{value!r} is not an http:// or https:// url")
        return value.rstrip("/")


@dataclass(frozen=True)
class RegistryProblem:
    """A problem at `key` (a path below `schema_registry`), with the fix."""

    key: tuple[str, ...]
    message: str
    hint: str


def registry_problems(spec: SchemaRegistrySpec) -> list[RegistryProblem]:
    problems = []
    if spec.basic_auth is not None and not isinstance(spec.basic_auth.password, SecretRef):
        problems.append(
            RegistryProblem(
                ("basic_auth", "password"),
                "a secret is written inline; secrets must not be kept in the file",
                "reference it instead: ${env:NAME} or ${file:PATH}",
            )
        )
    if spec.bearer_token is not None and not isinstance(spec.bearer_token, SecretRef):
        problems.append(
            RegistryProblem(
                ("bearer_token",),
                "a secret is written inline; secrets must not be kept in the file",
                "reference it instead: ${env:NAME} or ${file:PATH}",
            )
        )
    if spec.basic_auth is not None and spec.bearer_token is not None:
        problems.append(
            RegistryProblem(("bearer_token",), "both basic_auth and bearer_token are set", "keep one of the two")
        )
    if spec.tls is not None:
        if spec.url.startswith("http://"):
            problems.append(RegistryProblem(("tls",), "tls is set but the url is http://", "use an https:// url"))
        if (spec.tls.certificate_location is None) != (spec.tls.key_location is None):
            problems.append(
                RegistryProblem(
                    ("tls",),
                    "a client certificate needs both certificate_location and key_location",
                    "set both, or neither",
                )
            )
    return problems


@dataclass(frozen=True)
class RegistryConnection:
    """What a request to the registry needs, secrets resolved: never print or store one."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __repr__(self) -> str:  # the headers hold the credentials
        return f"RegistryConnection(url={self.url!r})"


def connection(spec: SchemaRegistrySpec, base_dir: Path | None) -> RegistryConnection:
    import base64

    headers: list[tuple[str, str]] = []
    if spec.basic_auth is not None:
        user = str(resolve_value(spec.basic_auth.username, base_dir))
        password = str(resolve_value(spec.basic_auth.password, base_dir))
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers.append(("Authorization", f"Basic {token}"))
    elif spec.bearer_token is not None:
        headers.append(("Authorization", f"Bearer {resolve_value(spec.bearer_token, base_dir)}"))

    def located(path: str | None) -> str | None:
        """The file's path, from the desired-state file's folder; only below the folders secrets may come from."""
        if path is None:
            return None
        p = Path(path)
        p = p if p.is_absolute() or base_dir is None else base_dir / p
        problem = outside_allowed_roots(p, base_dir)
        if problem:
            raise SecretResolutionError(f"schema_registry.tls: {problem}")
        return str(p)

    tls = spec.tls
    return RegistryConnection(
        url=spec.url,
        headers=tuple(headers),
        ca_file=located(tls.ca_location) if tls else None,
        cert_file=located(tls.certificate_location) if tls else None,
        key_file=located(tls.key_location) if tls else None,
    )
