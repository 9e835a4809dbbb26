"""Secret references in the desired state: `${env:NAME}` and `${file:PATH}`, resolved only when a client needs them.

A string that holds a reference becomes a `SecretRef`. Its `str`, `repr` and serialised form are the reference
text the user wrote (`"${env:CLOUD_PASSWORD}"`), never the resolved value, so models, dumps, digests, plans, the
state topic and logs cannot leak a secret. `SecretRef.resolve()` reads the environment or the file at the
moment of use; `$${` writes a literal `${`. A reference may sit inside a longer string, as in a JAAS line
`... password="${env:PW}";`.

A `${file:PATH}` reference reads the whole file, minus one trailing newline; a relative PATH is relative to the
directory of the desired-state file (the loader records it), else to the working directory. The file (symlinks
followed) must lie below that directory or below one of the folders listed in `KMIRROR_FILE_ROOTS`
(`os.pathsep`-separated, set by the operator; `/run/secrets` when unset): a desired state from a pull request
cannot read `~/.ssh/id_rsa` into a client property and have it sent to a broker of its choosing.

Every value `resolve()` produces is handed to `redaction.remember` (a per-environment value to
`redaction.remember_as`, shown as its reference), so that the CLI's output and the job's logs are scrubbed of
it. A `${file:..}` reads at most `MAX_SECRET_FILE_BYTES`.

Must not: resolve anything while loading, keep a resolved value anywhere but the scrubber, or print one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, PlainSerializer, PlainValidator, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.issues import SecretResolutionError
from reconciler.spec.redaction import remember, remember_as

FILE_ROOTS_ENV = "KMIRROR_FILE_ROOTS"
DEFAULT_FILE_ROOTS = "/run/secrets"
"""Where Docker and Kubernetes mount secrets; allowed unless `KMIRROR_FILE_ROOTS` says otherwise."""

_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

REDACTED = "***"
MAX_SECRET_FILE_BYTES = 1024 * 1024
"""A `${file:..}` reads at most this much: a key, a certificate chain or a token is a few kilobytes."""

# Client, Spark and storage properties that hold credentials: a literal value for one of these is refused
# (reference it instead). Besides these names: `*.password`, `*.key`, `*secret*`, `*token*`, `*credentials*`,
# `sasl.oauthbearer.*` (but for the non-secret settings below), `fs.azure.account.key.*`, `fs.*.sas.*`.
SENSITIVE_KEYS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl_key",
        "ssl.certificate.pem",
        "ssl.truststore.certificates",
    }
)
_NOT_SECRET_OAUTHBEARER = frozenset(
    {
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.header.urlencode",
        "sasl.oauthbearer.config",  # librdkafka's unsecured-JWT settings: principal=..., scope=..., lifetime
    }
)


def is_sensitive_key(key: str) -> bool:
    """Does this client, connector, Spark or storage property name hold a credential?"""
    lowered = key.lower()
    if lowered in _NOT_SECRET_OAUTHBEARER or lowered.endswith((".location", ".type", ".provider", ".algorithm")):
        return False
    return (
        lowered in SENSITIVE_KEYS
        or lowered.endswith((".password", ".key", ".secret", "jaas.config", ".key.pem", "basic.auth.user.info"))
        or any(word in lowered for word in ("secret", "token", "credentials", "passwd"))
        or lowered.startswith("sasl.oauthbearer.")
        or ".account.key." in lowered
        or ".sas." in lowered
    )


@dataclass(frozen=True)
class Reference:
    """One `${kind:target}` inside a string."""

    kind: str  # "env" | "file"
    target: str

    def __str__(self) -> str:
        return "${" + f"{self.kind}:{self.target}" + "}"


def reference_problems(text: str) -> list[str]:
    """Why `text` is not a well-formed string with references (empty list when it is)."""
    problems = []
    for match in _REFERENCE.finditer(text):
        body = match.group(1)
        if body is None:
            continue
        kind, _, target = body.partition(":")
        if kind not in ("env", "file"):
            problems.append(f"unknown reference ${{{body}}}: only ${{env:NAME}} and ${{file:PATH}} are supported")
        elif not target:
            problems.append(f"reference ${{{body}}} names no {'variable' if kind == 'env' else 'file'}")
        elif kind == "env" and not _ENV_NAME.fullmatch(target):
            problems.append(f"${{{body}}}: {target!r} is not a valid environment variable name")
    rest = _REFERENCE.sub("", text)
    if "${" in rest:
        problems.append("a '${' is not closed by '}' (write $${ for a literal ${)")
    return problems


def has_reference(text: str) -> bool:
    """Does `text` contain a `${...}` reference (or an escaped `$${`)?"""
    return "${" in text


class SecretRef:
    """A string with `${env:..}`/`${file:..}` references. Shows only the references; `.resolve()` at use."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        problems = reference_problems(text)
        if problems:
            raise ValueError("; ".join(problems))
        self._text = text

    @property
    def text(self) -> str:
        """The string as written, references unresolved. Safe to print, dump and hash."""
        return self._text

    @property
    def references(self) -> tuple[Reference, ...]:
        found = []
        for match in _REFERENCE.finditer(self._text):
            if match.group(1) is not None:
                kind, _, target = match.group(1).partition(":")
                found.append(Reference(kind, target))
        return tuple(found)

    def resolve(
        self, base_dir: Path | None = None, environ: Mapping[str, str] | None = None, *, secret: bool = True
    ) -> str:
        """The string with every reference replaced by its value. Raises SecretResolutionError if one is missing.

        `secret=False` for a per-environment value (bootstrap servers, the state topic): the scrubber shows it as
        the reference that read it (`${file:bootstrap.txt}`), not as `***`: a `${file:..}` can read any file below
        the allowed folders, so what it read is never printed either way.
        """
        env = os.environ if environ is None else environ
        text = self._text

        def keep(value: object, written: str) -> None:
            if secret:
                remember(value)
            else:
                remember_as(value, written)

        problems: list[str] = []

        def substitute(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return "${"
            kind, _, target = match.group(1).partition(":")
            if kind == "env":
                if target not in env:
                    problems.append(
                        f"environment variable {target} is not set (export {target} before running kmirror)"
                    )
                    return ""
                return env[target]
            path = Path(target).expanduser()
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            outside = outside_allowed_roots(path, base_dir, env)
            if outside:
                problems.append(outside)
                return ""
            try:
                content = read_capped(path, MAX_SECRET_FILE_BYTES).decode("utf-8")
            except FileTooLarge:
                problems.append(
                    f"secret file {path} is larger than {MAX_SECRET_FILE_BYTES // 1024} KiB (point the reference at "
                    "the file that holds the one value)"
                )
                return ""
            except UnicodeDecodeError:
                problems.append(f"secret file {path} is not UTF-8 text (a reference reads text: PEM, not DER)")
                return ""
            except OSError as exc:
                reason = exc.strerror or type(exc).__name__
                problems.append(f"cannot read secret file {path}: {reason} (create it or fix the path)")
                return ""
            value = content[:-1] if content.endswith("\n") else content
            keep(value, match.group(0))
            return value

        resolved = _REFERENCE.sub(substitute, text)
        if problems:
            raise SecretResolutionError("; ".join(problems))
        for match in _REFERENCE.finditer(text):
            if match.group(1) is not None and match.group(1).startswith("env:"):
                keep(env.get(match.group(1)[4:]), match.group(0))
        keep(resolved, text)
        return resolved

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"SecretRef({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretRef) and other._text == self._text

    def __hash__(self) -> int:
        return hash(("SecretRef", self._text))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _to_secret_ref,
            serialization=core_schema.plain_serializer_function_ser_schema(str, return_schema=core_schema.str_schema()),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"type": "string", "description": "A string that may hold ${env:NAME} or ${file:PATH} references."}


def allowed_file_roots(base_dir: Path | None, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where `${file:..}` may read: the desired-state file's folder (else the working directory), and every
    folder in `KMIRROR_FILE_ROOTS` (`/run/secrets` when it is not set)."""
    env = os.environ if environ is None else environ
    roots = [(base_dir or Path.cwd()).resolve()]
    listed = env.get(FILE_ROOTS_ENV, DEFAULT_FILE_ROOTS).split(os.pathsep)
    roots.extend(Path(p).expanduser().resolve() for p in listed if p.strip())
    return roots


def outside_allowed_roots(path: Path, base_dir: Path | None, environ: Mapping[str, str] | None = None) -> str:
    """Why `path` (symlinks followed) may not be read, or "" when it lies below an allowed folder."""
    real = path.resolve()
    roots = allowed_file_roots(base_dir, environ)
    if any(real.is_relative_to(root) for root in roots):
        return ""
    return (
        f"secret file {path} is outside the folders kmirror may read secrets from "
        f"({', '.join(str(r) for r in roots)}): move it below the desired-state file's folder, or add its folder "
        f"to {FILE_ROOTS_ENV} (separate several with '{os.pathsep}')"
    )


def _to_secret_ref(value: Any) -> SecretRef:
    if isinstance(value, SecretRef):
        return value
    if isinstance(value, str):
        return SecretRef(value)
    raise ValueError(f"expected a string, got {type(value).__name__}")


def _config_value(value: Any) -> str | int | float | bool | SecretRef:
    if isinstance(value, SecretRef | bool | int | float):
        return value
    if isinstance(value, str):
        return SecretRef(value) if has_reference(value) else value
    raise ValueError(f"expected a string, number or boolean, got {_kind(value)}")


def _serialize_config_value(value: str | int | float | bool | SecretRef) -> str | int | float | bool:
    return str(value) if isinstance(value, SecretRef) else value


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    return type(value).__name__


ConfigValue = Annotated[
    SecretRef | bool | int | float | str,
    PlainValidator(_config_value),
    PlainSerializer(_serialize_config_value),
    WithJsonSchema(
        {
            "type": ["string", "number", "integer", "boolean"],
            "description": "A client property value; strings may hold ${env:NAME} or ${file:PATH} references.",
        }
    ),
]
"""A Kafka/Spark property value: number, boolean or string; strings with references become `SecretRef`s."""


def resolve_value(
    value: str | int | float | bool | SecretRef,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | int | float | bool:
    """A property value ready for a client: references resolved, everything else unchanged."""
    if isinstance(value, SecretRef):
        return value.resolve(base_dir, environ)
    return value


def resolve_properties(
    properties: Mapping[str, str | int | float | bool | SecretRef],
    *,
    context: str,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str | int | float | bool]:
    """Resolve every value of a property map; all failures reported at once, each naming `context.key`."""
    resolved: dict[str, str | int | float | bool] = {}
    problems: list[str] = []
    for key, value in properties.items():
        try:
            resolved[key] = resolve_value(value, base_dir, environ)
        except SecretResolutionError as exc:
            problems.append(f"{context}.{key}: {exc}")
    if problems:
        raise SecretResolutionError("\n".join(problems))
    return resolved


def redact(value: object) -> object:
    """A value safe to show: references as written, literal values of sensitive keys never reach here."""
    return str(value) if isinstance(value, SecretRef) else value
