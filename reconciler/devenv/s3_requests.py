"""The few S3 requests the dev tooling makes of its local MinIO: create a bucket, list a prefix, delete objects.

Signed with AWS Signature Version 4 (the algorithm AWS documents, "Signature Version 4 signing process"; MinIO
checks it as S3 does), over plain HTTP on loopback, with no SDK: the control plane needs three calls, not a client
library. The secret key signs; it is never sent, logged or put in an error message.

Must not: be imported by production code (only `devenv/`, `cli/` and the tests); talk to anything but the endpoint
it is given.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class S3RequestError(Exception):
    """An S3 request failed (the message has the status and S3's error code, never a key)."""


@dataclass(frozen=True)
class S3Endpoint:
    """Where and as whom: a path-style endpoint (`http://127.0.0.1:9000`), its region, and the key pair."""

    url: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def __repr__(self) -> str:  # keys stay out of tracebacks and logs
        return f"S3Endpoint(url={self.url!r}, region={self.region!r})"


def create_bucket(endpoint: S3Endpoint, bucket: str) -> None:
    """Create `bucket`; one that exists and is ours already is fine."""
    try:
        _request(endpoint, "PUT", f"/{bucket}")
    except S3RequestError as e:
        if "BucketAlreadyOwnedByYou" not in str(e) and "BucketAlreadyExists" not in str(e):
            raise


def list_keys(endpoint: S3Endpoint, bucket: str, prefix: str = "") -> list[str]:
    """Every object key in `bucket` under `prefix` (ListObjectsV2, page by page)."""
    keys: list[str] = []
    token: str | None = None
    while True:
        query = {"list-type": "2", "prefix": prefix}
        if token:
            query["continuation-token"] = token
        root = ET.fromstring(_request(endpoint, "GET", f"/{bucket}", query))
        keys += [el.text or "" for el in root.iter(f"{_NS}Key")]
        truncated = root.findtext(f"{_NS}IsTruncated") == "true"
        token = root.findtext(f"{_NS}NextContinuationToken")
        if not truncated or not token:
            return keys


def _request(endpoint: S3Endpoint, method: str, path: str, query: dict[str, str] | None = None) -> bytes:
    url = urllib.parse.urlsplit(endpoint.url)
    now = datetime.datetime.now(datetime.UTC)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted((query or {}).items())
    )
    canonical_path = urllib.parse.quote(path, safe="/-_.~")
    headers = {"host": url.netloc, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [method, canonical_path, canonical_query, *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed,
         _EMPTY_SHA256]
    )  # fmt: skip
    scope = f"{day}/{endpoint.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{endpoint.secret_key}".encode()
    for part in (day, endpoint.region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={endpoint.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    target = f"{endpoint.url.rstrip('/')}{canonical_path}" + (f"?{canonical_query}" if canonical_query else "")
    request = urllib.request.Request(target, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as e:
        code = ET.fromstring(e.read() or b"<Error/>").findtext("Code") or "?"
        raise S3RequestError(f"S3 {method} {path}: HTTP {e.code} {code}") from None
    except OSError as e:
        raise S3RequestError(f"S3 {method} {path}: {type(e).__name__}: {e}") from None
