"""The YARN runner's two Hadoop services, from the control plane: HDFS files through WebHDFS, and the
ResourceManager's REST API. Both are plain HTTP from Python, read from the Hadoop client configuration folder
(`HADOOP_CONF_DIR`: `hdfs-site.xml`'s `dfs.namenode.http-address`, `yarn-site.xml`'s
`yarn.resourcemanager.webapp.address`).

Why WebHDFS and not a JVM tool: `kmirror plan` and `kmirror status` read every YARN job's status.json; a JVM with
Hadoop's client on its classpath costs 1-3 s per start on a busy 2-core machine, an HTTP GET a few milliseconds, and
needs no Hadoop jars on the control machine. The job itself (in the driver) uses Hadoop's FileSystem API through
Spark's JVM (`replication/yarn_entry.py`).

Identity: simple authentication (`user.name`: `$HADOOP_USER_NAME`, else the login name), as Hadoop's own clients do
on a cluster without Kerberos. A Kerberized cluster (SPNEGO on WebHDFS and the RM) is not supported by this module.

Must not: hold a secret, or write anything but the files the runner names; decide anything about a job.
"""

from __future__ import annotations

import getpass
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from reconciler.runners.common import JobRunnerError

_TIMEOUT_S = 15.0
#: YARN application states in which it runs or is about to.
ACTIVE_STATES = frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"})


def hadoop_user() -> str:
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def site_properties(conf_dir: Path) -> dict[str, str]:
    """Every `<property>` of the `*-site.xml` files in `conf_dir` (later files win, as Hadoop's merge does)."""
    props: dict[str, str] = {}
    for name in ("core-site.xml", "hdfs-site.xml", "yarn-site.xml"):
        path = conf_dir / name
        if not path.is_file():
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise JobRunnerError(f"{path}: not a Hadoop configuration file ({exc})") from None
        for prop in root.iter("property"):
            key, value = prop.findtext("name"), prop.findtext("value")
            if key and value is not None:
                props[key.strip()] = value.strip()
    return props


@dataclass(frozen=True)
class HadoopClient:
    """WebHDFS and the ResourceManager's REST API of one Hadoop cluster."""

    namenode_http: str  # http://host:port
    resource_manager: str  # http://host:port
    user: str
    default_fs: str = ""  # core-site.xml's fs.defaultFS, when it is an hdfs:// URI

    @classmethod
    def from_conf_dir(cls, conf_dir: Path, *, yarn: bool = True) -> HadoopClient:
        """The cluster of `conf_dir`; `yarn=False`: HDFS only (no ResourceManager needed, `resource_manager` "")."""
        if not conf_dir.is_dir():
            raise JobRunnerError(f"the Hadoop configuration folder {conf_dir} does not exist")
        props = site_properties(conf_dir)
        rm = props.get("yarn.resourcemanager.webapp.address")
        if rm is None and props.get("yarn.resourcemanager.hostname"):
            rm = f"{props['yarn.resourcemanager.hostname']}:8088"
        if rm is None and not yarn:
            rm = ""
        if rm is None:
            raise JobRunnerError(
                f"{conf_dir}/yarn-site.xml names no ResourceManager (yarn.resourcemanager.webapp.address or "
                "yarn.resourcemanager.hostname)"
            )
        nn = props.get("dfs.namenode.http-address")
        if nn is None:
            default_fs = urllib.parse.urlsplit(props.get("fs.defaultFS", ""))
            if default_fs.scheme != "hdfs" or not default_fs.hostname:
                raise JobRunnerError(
                    f"{conf_dir}: neither dfs.namenode.http-address (hdfs-site.xml) nor an hdfs:// fs.defaultFS "
                    "(core-site.xml) says where the NameNode's WebHDFS is"
                )
            nn = f"{default_fs.hostname}:9870"
        default = props.get("fs.defaultFS", "").rstrip("/")
        return cls(_http(nn), _http(rm) if rm else "", hadoop_user(), default if default.startswith("hdfs://") else "")

    def home_folder(self, name: str) -> str:
        """`<fs.defaultFS>/user/<user>/<name>`: this user's folder on the cluster's HDFS (as `.sparkStaging` is)."""
        if not self.default_fs:
            raise JobRunnerError(
                "the Hadoop configuration's fs.defaultFS (core-site.xml) is not an hdfs:// URI, so kmirror has no "
                "HDFS for the jobs' folders of an s3a: checkpoint_root; set spark.job_folder_root to an hdfs:// URI"
            )
        return f"{self.default_fs}/user/{self.user}/{name}"

    # -- WebHDFS --------------------------------------------------------------------------------------------
    def read(self, uri: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        try:
            with self._open("GET", uri, "OPEN") as resp:
                data: bytes = resp.read()
                return data
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise JobRunnerError(f"WebHDFS could not read {uri}: HTTP {exc.code} {_message(exc)}") from None

    def exists(self, uri: str) -> bool:
        try:
            with self._open("GET", uri, "GETFILESTATUS"):
                return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise JobRunnerError(f"WebHDFS could not look up {uri}: HTTP {exc.code} {_message(exc)}") from None

    def listing(self, uri: str) -> dict[str, bool]:
        """The entries of the folder `uri`: name -> whether it is a folder; empty when it does not exist."""
        try:
            with self._open("GET", uri, "LISTSTATUS") as resp:
                statuses = json.loads(resp.read())["FileStatuses"]["FileStatus"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {}
            raise JobRunnerError(f"WebHDFS could not list {uri}: HTTP {exc.code} {_message(exc)}") from None
        except (ValueError, KeyError) as exc:
            raise JobRunnerError(f"WebHDFS could not list {uri}: {exc}") from None
        return {str(s["pathSuffix"]): s.get("type") == "DIRECTORY" for s in statuses}

    def write(self, uri: str, data: bytes) -> None:
        """Create or overwrite the file (owner-only permissions); its folder is made if missing."""
        try:
            # WebHDFS's two steps: the NameNode answers with the DataNode to send the bytes to.
            with self._open("PUT", uri, "CREATE", overwrite="true", permission="600", noredirect="true") as resp:
                location = json.loads(resp.read())["Location"]
            request = urllib.request.Request(location, data=data, method="PUT")
            request.add_header("Content-Type", "application/octet-stream")
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S):
                pass
        except urllib.error.HTTPError as exc:
            raise JobRunnerError(f"WebHDFS could not write {uri}: HTTP {exc.code} {_message(exc)}") from None
        except (OSError, ValueError, KeyError) as exc:
            raise JobRunnerError(f"WebHDFS could not write {uri}: {exc}") from None

    def upload_once(self, source: Path, uri: str) -> str:
        """`source` at `uri` unless a file is there already (a name that holds a version: written once, then
        shared), written beside it and renamed so that no reader sees it half-written. Returns `uri`."""
        if not self.exists(uri):
            self.write(f"{uri}.tmp", source.read_bytes())
            self.rename(f"{uri}.tmp", uri)
        return uri

    def rename(self, uri: str, to: str) -> None:
        """Rename within the filesystem (atomic on HDFS): readers see no half-written file."""
        destination = urllib.parse.urlsplit(to).path
        try:
            with self._open("PUT", uri, "RENAME", destination=destination) as resp:
                if not json.loads(resp.read()).get("boolean"):
                    raise JobRunnerError(f"WebHDFS could not rename {uri} to {to}")
        except urllib.error.HTTPError as exc:
            raise JobRunnerError(f"WebHDFS could not rename {uri}: HTTP {exc.code} {_message(exc)}") from None

    def mkdirs(self, uri: str) -> None:
        try:
            with self._open("PUT", uri, "MKDIRS", permission="700"):
                pass
        except urllib.error.HTTPError as exc:
            raise JobRunnerError(f"WebHDFS could not create {uri}: HTTP {exc.code} {_message(exc)}") from None

    def delete(self, uri: str, *, recursive: bool = False) -> None:
        try:
            with self._open("DELETE", uri, "DELETE", recursive="true" if recursive else "false"):
                pass
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise JobRunnerError(f"WebHDFS could not delete {uri}: HTTP {exc.code} {_message(exc)}") from None

    def _open(self, method: str, uri: str, op: str, **params: str) -> Any:
        path = urllib.parse.urlsplit(uri).path or "/"
        query = urllib.parse.urlencode({"op": op, "user.name": self.user, **params})
        url = f"{self.namenode_http}/webhdfs/v1{urllib.parse.quote(path)}?{query}"
        try:
            return urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=_TIMEOUT_S)
        except urllib.error.HTTPError:
            raise
        except OSError as exc:
            raise JobRunnerError(f"WebHDFS at {self.namenode_http} did not answer ({exc})") from None

    # -- the ResourceManager --------------------------------------------------------------------------------
    def application(self, app_id: str) -> YarnApp | None:
        """The RM's record of the application (`state`, `finalStatus`, `diagnostics`, ...), None if it has none."""
        try:
            app = self._rm("GET", f"/ws/v1/cluster/apps/{app_id}").get("app")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise JobRunnerError(
                f"the ResourceManager {self.resource_manager}: HTTP {exc.code} {_message(exc)}"
            ) from None
        return cast(YarnApp, app) if isinstance(app, dict) else None  # its fields are checked where they are read

    def attempts(self, app_id: str) -> list[object]:
        """The application's attempts (the RM's records of them; only their number is used)."""
        try:
            found = self._rm("GET", f"/ws/v1/cluster/apps/{app_id}/appattempts").get("appAttempts") or {}
        except urllib.error.HTTPError:
            return []
        attempts = found.get("appAttempt") if isinstance(found, dict) else None
        return [a for a in attempts or [] if isinstance(a, dict)]

    def kill(self, app_id: str) -> None:
        try:
            self._rm("PUT", f"/ws/v1/cluster/apps/{app_id}/state", {"state": "KILLED"})
        except urllib.error.HTTPError as exc:
            if exc.code != 202:
                raise JobRunnerError(
                    f"the ResourceManager {self.resource_manager} refused to kill {app_id}: HTTP {exc.code} "
                    f"{_message(exc)}"
                ) from None

    def _rm(self, method: str, path: str, body: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The RM's JSON answer to `method path` (the REST edge: callers read it field by field)."""
        url = f"{self.resource_manager}{path}?{urllib.parse.urlencode({'user.name': self.user})}"
        request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as resp:
                text = resp.read()
        except urllib.error.HTTPError:
            raise
        except OSError as exc:
            raise JobRunnerError(f"the ResourceManager {self.resource_manager} did not answer ({exc})") from None
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            raise JobRunnerError(f"the ResourceManager {self.resource_manager} answered {path} with no JSON") from None
        return data if isinstance(data, dict) else {}


class YarnApp(TypedDict, total=False):
    """What the runner reads of the RM's record of an application (`GET /ws/v1/cluster/apps/<id>`)."""

    state: str
    finalStatus: str
    diagnostics: str
    amHostHttpAddress: str


def _http(address: str) -> str:
    return address.rstrip("/") if "://" in address else f"http://{address}"


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read().decode(errors="replace")
    except OSError:
        return ""
    try:
        data = json.loads(body)
        remote = data.get("RemoteException") or {}
        return str(remote.get("message") or data.get("message") or body)[:300]
    except (ValueError, AttributeError):
        return body[:300]
