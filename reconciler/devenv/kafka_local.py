"""Runs a real, single-node Apache Kafka cluster (KRaft, combined broker+controller) from Maven Central jars.

One cluster is one folder (`home`): its `server.properties`, its data (`data/`), its logs (`logs/server.log`
and `logs/kafka.out`) and `cluster.json`, the record of the running process (pid, ports, version). `start` is
a no-op for a cluster that already runs and answers; `stop` ends the whole process group and waits for it.

Used by `kmirror dev up|down|status` and by the test fixtures alike, so both run brokers the same way.
No Docker: the broker is `java -cp <jars> kafka.Kafka server.properties`.

TLS (`BrokerOptions.tls`, from `ensure_tls_material`): one private CA per root folder (made with `openssl`), a
server certificate for 127.0.0.1/localhost and a client certificate. It adds an `SSL` listener that requires a
client certificate (mTLS), and with SCRAM users or `oauth` a `SASL_SSL` listener (server-authenticated TLS) for
SCRAM-SHA-256/512 and unsecured-JWT OAUTHBEARER. The PLAINTEXT listener stays, for the broker's own use and
the readiness check; a client configured for TLS never sees its port.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reconciler.devenv import jars
from reconciler.errors import DevEnvError
from reconciler.runners.processes import alive

LOOPBACK = "127.0.0.1"
_RECORD = "cluster.json"
#: `offsets.topic.num.partitions` of the local brokers: few, so that a new cluster loads its group coordinators fast.
OFFSETS_TOPIC_PARTITIONS = 10
#: The admin user of the SCRAM listener; also a super user when the authorizer is on.
ADMIN_USER = "admin"


@dataclass(frozen=True)
class BrokerOptions:
    """What the broker needs beyond a plain PLAINTEXT listener (for the ACL and security work).

    `authorizer` turns on KRaft's StandardAuthorizer; the PLAINTEXT listener's ANONYMOUS principal and
    `User:admin` are super users, so kmirror's admin client keeps working while other principals are checked.
    `scram_users` adds a SASL_PLAINTEXT listener with SCRAM-SHA-256/512 and creates those users at format time.
    `tls` adds the mTLS `SSL` listener, and (with `scram_users` or `oauth`) a `SASL_SSL` listener; `oauth` enables
    unsecured-JWT OAUTHBEARER on it (on the SASL_PLAINTEXT listener without `tls`).
    """

    authorizer: bool = False
    scram_users: tuple[tuple[str, str], ...] = ()
    heap: str = "768m"
    tls: TlsMaterial | None = None
    oauth: bool = False


@dataclass(frozen=True)
class LocalCluster:
    """The record of one started cluster, as kept in `<home>/cluster.json`."""

    name: str
    version: str
    home: str
    port: int
    controller_port: int
    sasl_port: int | None = None
    pid: int | None = None
    authorizer: bool = False
    started_at: float = field(default=0.0)
    tls_port: int | None = None
    sasl_ssl_port: int | None = None
    tls_dir: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str | None:
        return f"{LOOPBACK}:{self.sasl_port}" if self.sasl_port else None

    @property
    def tls_bootstrap_servers(self) -> str | None:
        return f"{LOOPBACK}:{self.tls_port}" if self.tls_port else None

    @property
    def sasl_ssl_bootstrap_servers(self) -> str | None:
        return f"{LOOPBACK}:{self.sasl_ssl_port}" if self.sasl_ssl_port else None

    @property
    def log_dir(self) -> Path:
        return Path(self.home) / "logs"


def read_record(home: Path) -> LocalCluster | None:
    path = home / _RECORD
    if not path.exists():
        return None
    return LocalCluster(**json.loads(path.read_text()))


def is_running(cluster: LocalCluster) -> bool:
    return _alive(cluster) and _port_open(cluster.port)


def _alive(cluster: LocalCluster) -> bool:
    """Whether the recorded broker process still runs. Pids are reused (pid_max is 32768 here and a test session
    starts thousands of processes): a stale record's pid may name another process by now, which must never be
    signalled, so the process must also be the broker of this record's home (its command line names it)."""
    if cluster.pid is None or not _pid_alive(cluster.pid):
        return False
    try:
        cmdline = Path(f"/proc/{cluster.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return not Path("/proc/self").exists()  # no /proc to ask: trust the pid
    return cluster.home in cmdline


def start(
    name: str,
    version: str,
    home: Path,
    options: BrokerOptions | None = None,
    preferred_port: int | None = None,
    timeout: float = 90.0,
) -> LocalCluster:
    """Starts the cluster in `home` (formatting its storage the first time) and waits until it answers."""
    options = options or BrokerOptions()
    home = home.resolve()
    previous = read_record(home)
    if previous is not None and is_running(previous):
        return previous
    if previous is not None and previous.pid is not None and _alive(previous):
        _terminate(previous.pid, grace=10)  # alive but not answering: start afresh rather than guess
    libs = jars.kafka_libs(version)
    (home / "logs").mkdir(parents=True, exist_ok=True)

    port, controller_port, sasl_port = _ports(previous, preferred_port, bool(options.scram_users) or options.oauth)
    tls_port, sasl_ssl_port = _tls_ports(previous, options, {port, controller_port, sasl_port or 0})
    config = home / "server.properties"
    config.write_text(
        _with_tls(_server_properties(home, port, controller_port, sasl_port, options), tls_port, sasl_ssl_port, options)
    )
    _write_log_config(home, version)
    if not (home / "data" / "meta.properties").exists():
        _format_storage(libs, home, config, options)

    out = (home / "logs" / "kafka.out").open("ab")
    proc = subprocess.Popen(
        [*_java(libs, home, version, options.heap), "kafka.Kafka", str(config)],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, cwd=home,
    )  # fmt: skip
    out.close()
    cluster = LocalCluster(
        name=name, version=version, home=str(home), port=port, controller_port=controller_port,
        sasl_port=sasl_port, pid=proc.pid, authorizer=options.authorizer, started_at=time.time(),
        tls_port=tls_port, sasl_ssl_port=sasl_ssl_port, tls_dir=options.tls.folder if options.tls else None,
    )  # fmt: skip
    (home / _RECORD).write_text(json.dumps(asdict(cluster), indent=2) + "\n")
    _wait_ready(cluster, proc, timeout)
    return cluster


def stop(home: Path, grace: float = 30.0) -> bool:
    """Stops the cluster in `home`; returns whether a process was running. Data is kept for the next start."""
    cluster = read_record(home.resolve())
    if cluster is None or cluster.pid is None or not _alive(cluster):
        return False
    _terminate(cluster.pid, grace)
    return True


def _terminate(pid: int, grace: float) -> None:
    """SIGTERM the process group (a controlled shutdown), then SIGKILL what is left after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    while _pid_alive(pid):
        time.sleep(0.1)


def _pid_alive(pid: int) -> bool:
    try:
        # Reap it if it is our own child that exited (tests start brokers in-process).
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    return alive(pid)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((LOOPBACK, port)) == 0


def _ports(previous: LocalCluster | None, preferred: int | None, sasl: bool) -> tuple[int, int, int | None]:
    """The broker, controller and SASL ports: the previous run's if still free (clients keep their
    bootstrap address across restarts), else `preferred`, +1, +2 if free, else any free loopback port."""
    if previous is not None:
        wanted = [previous.port, previous.controller_port, previous.sasl_port]
    elif preferred:
        wanted = [preferred, preferred + 1, preferred + 2]
    else:
        wanted = [None, None, None]
    port = _pick_port(wanted[0])
    controller_port = _pick_port(wanted[1], {port})
    sasl_port = _pick_port(wanted[2], {port, controller_port}) if sasl else None
    return port, controller_port, sasl_port


def _pick_port(preferred: int | None, taken: set[int] | None = None) -> int:
    taken = taken or set()
    if preferred and 1024 < preferred < 65536 and preferred not in taken and _port_free(preferred):
        return preferred
    while True:
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def _java_bin() -> str:
    return os.environ.get("KMIRROR_JAVA", "java")


def _java(libs: Path, home: Path, version: str, heap: str) -> list[str]:
    log_opt = (
        f"-Dlog4j.configuration=file:{home / 'log4j.properties'}"
        if version.startswith(("2.", "3."))
        else f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}"
    )
    return [
        _java_bin(), f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC",
        "-Djava.awt.headless=true", f"-Dkafka.logs.dir={home / 'logs'}", log_opt,
        "-cp", f"{libs}/*",
    ]  # fmt: skip


def _server_properties(
    home: Path, port: int, controller_port: int, sasl_port: int | None, options: BrokerOptions
) -> str:
    listeners = [f"PLAINTEXT://{LOOPBACK}:{port}", f"CONTROLLER://{LOOPBACK}:{controller_port}"]
    advertised = [f"PLAINTEXT://{LOOPBACK}:{port}"]
    if sasl_port:
        listeners.append(f"SASL_PLAINTEXT://{LOOPBACK}:{sasl_port}")
        advertised.append(f"SASL_PLAINTEXT://{LOOPBACK}:{sasl_port}")
    lines = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "log.dirs": str(home / "data"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": str(OFFSETS_TOPIC_PARTITIONS),
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Small segments and a fast cleaner keep compaction observable in tests of compacted topics.
        "log.cleaner.backoff.ms": "1000",
    }
    if options.authorizer:
        lines["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        lines["super.users"] = f"User:ANONYMOUS;User:{ADMIN_USER}"
        lines["allow.everyone.if.no.acl.found"] = "false"
    if sasl_port:
        lines["sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512"
        for mech in ("scram-sha-256", "scram-sha-512"):
            lines[f"listener.name.sasl_plaintext.{mech}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def _write_log_config(home: Path, version: str) -> None:
    server_log = home / "logs" / "server.log"
    if version.startswith(("2.", "3.")):
        (home / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={server_log}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
    else:
        (home / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {server_log}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
        )


def _format_storage(libs: Path, home: Path, config: Path, options: BrokerOptions) -> None:
    cmd = [_java_bin(), "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format",
           "-t", _random_cluster_id(), "-c", str(config), "--ignore-formatted"]  # fmt: skip
    for user, password in options.scram_users:
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            cmd += ["--add-scram", f"{mech}=[name={user},password={password}]"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=home, check=False)
    if result.returncode != 0:
        raise DevEnvError(f"formatting Kafka storage in {home / 'data'} failed:\n{result.stdout}{result.stderr}")


def _random_cluster_id() -> str:
    """A Kafka `Uuid` in its base64 form; like `Uuid.randomUuid()`, never one that starts with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _wait_ready(cluster: LocalCluster, proc: subprocess.Popen[bytes], timeout: float) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevEnvError(
                f"Kafka {cluster.version} ({cluster.name}) exited with code {proc.returncode} while starting; "
                f"see {cluster.log_dir / 'kafka.out'}:\n{_tail(cluster.log_dir / 'kafka.out')}"
            )
        if _port_open(cluster.port):
            # A metadata request, not an Admin API call: a describe_cluster that timed out while the broker was
            # starting and was answered later can trip librdkafka's `eonce->refcnt > 0` assertion and abort the
            # process (confluentinc/librdkafka#4605; seen here starting the fault tests' brokers).
            try:
                if admin.list_topics(timeout=3).brokers:
                    return
            except Exception:  # not answering yet; the broker is still starting
                pass
        time.sleep(0.25)
    _terminate(proc.pid, grace=5)
    raise DevEnvError(
        f"Kafka {cluster.version} ({cluster.name}) did not answer on {cluster.bootstrap_servers} within "
        f"{timeout:.0f}s; see {cluster.log_dir}:\n{_tail(cluster.log_dir / 'server.log')}"
    )


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- TLS --------------------------------------------------------------------------------------------------------

TLS_CLIENT_CN = "kmirror-client"


@dataclass(frozen=True)
class TlsMaterial:
    """PEM files of a private CA, the brokers' certificate and a client certificate (keys unencrypted, PKCS#8)."""

    folder: str

    @property
    def ca_pem(self) -> str:
        return str(Path(self.folder) / "ca.pem")

    @property
    def server_bundle_pem(self) -> str:
        """The broker's key and certificate chain in one file, as Kafka's PEM keystore wants them."""
        return str(Path(self.folder) / "server-bundle.pem")

    @property
    def client_cert_pem(self) -> str:
        return str(Path(self.folder) / "client.pem")

    @property
    def client_key_pem(self) -> str:
        return str(Path(self.folder) / "client.key")


def ensure_tls_material(folder: Path, days: int = 825) -> TlsMaterial:
    """A CA, a server certificate (127.0.0.1, localhost) and a client certificate in `folder`, made with openssl
    the first time and reused after (clients keep trusting the same CA across `dev up`). Keys are 0600."""
    folder = folder.resolve()
    material = TlsMaterial(str(folder))
    wanted = (material.ca_pem, material.server_bundle_pem, material.client_cert_pem, material.client_key_pem)
    if all(Path(p).exists() for p in wanted):
        return material
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key, server_key = folder / "ca.key", folder / "server.key"
    _openssl(
        folder, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", material.ca_pem,
        "-days", str(days), "-subj", "/CN=kmirror dev CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    for key, cert, cn, extensions in (
        (server_key, folder / "server.pem", "localhost",
         "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"),
        (Path(material.client_key_pem), Path(material.client_cert_pem), TLS_CLIENT_CN,
         "extendedKeyUsage=clientAuth\n"),
    ):  # fmt: skip
        csr, ext = folder / f"{cert.stem}.csr", folder / f"{cert.stem}.ext"
        ext.write_text(extensions)
        _openssl(
            folder, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={cn}"
        )
        _openssl(
            folder, "x509", "-req", "-in", csr, "-CA", material.ca_pem, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", str(days), "-sha256", "-extfile", ext,
        )  # fmt: skip
        csr.unlink()
        ext.unlink()
    bundle = Path(material.server_bundle_pem)
    bundle.write_text(server_key.read_text() + (folder / "server.pem").read_text() + Path(material.ca_pem).read_text())
    for private in (ca_key, server_key, bundle, Path(material.client_key_pem)):
        private.chmod(0o600)
    return material


def _openssl(cwd: Path, *args: object) -> None:
    try:
        result = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False)
    except FileNotFoundError:
        raise DevEnvError("openssl is not installed; it makes the CA and certificates for --tls") from None
    if result.returncode != 0:
        raise DevEnvError(f"openssl {args[0]} failed while making TLS certificates in {cwd}:\n{result.stderr}")


def _tls_ports(previous: LocalCluster | None, options: BrokerOptions, taken: set[int]) -> tuple[int | None, int | None]:
    """The SSL (mTLS) and SASL_SSL ports: the previous run's if still free, else any free loopback port."""
    if options.tls is None:
        return None, None
    tls_port = _pick_port(previous.tls_port if previous else None, taken)
    if not (options.scram_users or options.oauth):
        return tls_port, None
    return tls_port, _pick_port(previous.sasl_ssl_port if previous else None, {*taken, tls_port})


def _with_tls(properties: str, tls_port: int | None, sasl_ssl_port: int | None, options: BrokerOptions) -> str:
    """`server.properties` text with the TLS listeners and OAUTHBEARER added (later keys override earlier ones)."""
    lines = dict(line.split("=", 1) for line in properties.splitlines() if "=" in line)
    extra: dict[str, str] = {}
    oauth_jaas = f'{_OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{ADMIN_USER}";'
    if options.oauth and "sasl.enabled.mechanisms" in lines and sasl_ssl_port is None:
        extra["sasl.enabled.mechanisms"] = lines["sasl.enabled.mechanisms"] + ",OAUTHBEARER"
        extra["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = oauth_jaas
    tls = options.tls
    if tls is None or tls_port is None:
        return properties + "".join(f"{k}={v}\n" for k, v in extra.items())
    listeners, advertised = [lines["listeners"]], [lines["advertised.listeners"]]
    protocols = [lines["listener.security.protocol.map"]]
    listeners.append(f"SSL://{LOOPBACK}:{tls_port}")
    advertised.append(f"SSL://{LOOPBACK}:{tls_port}")
    protocols.append("SSL:SSL")
    extra.update(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": tls.server_bundle_pem,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": tls.ca_pem,
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    if sasl_ssl_port is not None:
        listeners.append(f"SASL_SSL://{LOOPBACK}:{sasl_ssl_port}")
        advertised.append(f"SASL_SSL://{LOOPBACK}:{sasl_ssl_port}")
        protocols.append("SASL_SSL:SASL_SSL")
        mechanisms = (["SCRAM-SHA-256", "SCRAM-SHA-512"] if options.scram_users else []) + (
            ["OAUTHBEARER"] if options.oauth else []
        )
        extra["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = ",".join(mechanisms)
        extra["listener.name.sasl_ssl.ssl.client.auth"] = "none"
        for mech in ("scram-sha-256", "scram-sha-512") if options.scram_users else ():
            extra[f"listener.name.sasl_ssl.{mech}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        if options.oauth:
            extra["listener.name.sasl_ssl.oauthbearer.sasl.jaas.config"] = oauth_jaas
    extra["listeners"] = ",".join(listeners)
    extra["advertised.listeners"] = ",".join(advertised)
    extra["listener.security.protocol.map"] = ",".join(protocols)
    return properties + "".join(f"{k}={v}\n" for k, v in extra.items())


_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def tls_status(cluster: LocalCluster) -> dict[str, str] | None:
    """What `kmirror dev status --format json` shows of a cluster's TLS listener: where, and the PEM files."""
    if not cluster.tls_port or not cluster.tls_dir:
        return None
    tls = TlsMaterial(cluster.tls_dir)
    return {
        "bootstrap_servers": f"{LOOPBACK}:{cluster.tls_port}",
        "ca_pem": tls.ca_pem,
        "client_cert_pem": tls.client_cert_pem,
        "client_key_pem": tls.client_key_pem,
    }


# -- clusters of several brokers ------------------------------------------------------------------------------
# A cluster of N > 1 brokers is N combined broker+controller processes, one KRaft quorum of N voters, each broker
# in `<home>/broker-<id>/` with its own `cluster.json` (a `LocalCluster` record, so `is_running` and `stop` work on
# one broker), and `<home>/brokers.json` naming them. One broker (the default) keeps the single-folder layout above.

_BROKERS = "brokers.json"
#: Ports of broker `id` (1-based) of a cluster preferring `port`: port + 10 * (id - 1), its controller on the next.
_PORT_STEP = 10


@dataclass(frozen=True)
class BrokerState:
    """One broker of a cluster, as `kmirror dev status` reports it."""

    id: int
    port: int
    pid: int | None
    running: bool


def broker_homes(home: Path) -> list[Path]:
    """The broker folders of a multi-broker cluster in `home`, by id; empty for a single-broker one."""
    path = home / _BROKERS
    if not path.exists():
        return []
    ids = json.loads(path.read_text())["brokers"]
    return [home / f"broker-{i}" for i in ids]


def start_brokers(
    name: str,
    version: str,
    home: Path,
    brokers: int = 1,
    options: BrokerOptions | None = None,
    preferred_port: int | None = None,
    timeout: float = 120.0,
) -> list[LocalCluster]:
    """Start `brokers` brokers of the cluster in `home` (each broker that is not running; all at once, since a
    quorum needs a majority of its voters); returns their records, by id. One broker: `start` itself."""
    home = home.resolve()
    if brokers < 1:
        raise DevEnvError(f"a cluster needs at least one broker, not {brokers}")
    known = broker_homes(home)
    if brokers == 1 and not known:
        return [start(name, version, home, options, preferred_port, timeout)]
    if read_record(home) is not None and not known:
        raise DevEnvError(
            f"{home} holds a single-broker cluster; stop it and move its folder away to start {brokers} brokers there"
        )
    if known and len(known) != brokers:
        raise DevEnvError(
            f"{home} holds a cluster of {len(known)} brokers, not {brokers}; start it with --brokers {len(known)}, "
            "or stop it and move its folder away"
        )
    options = options or BrokerOptions()
    libs = jars.kafka_libs(version)
    home.mkdir(parents=True, exist_ok=True)
    ids = list(range(1, brokers + 1))
    previous = {i: read_record(home / f"broker-{i}") for i in ids}
    ports: dict[int, tuple[int, int]] = {}
    taken: set[int] = set()
    for i in ids:
        before = previous[i]
        if before is not None:  # the quorum's voters are fixed: a broker comes back on its own ports
            ports[i] = (before.port, before.controller_port)
            deadline = time.monotonic() + 15  # a just-killed broker's sockets take a moment to close
            busy = [p for p in ports[i] if not is_running(before) and not _port_free(p)]
            while busy and time.monotonic() < deadline:
                time.sleep(0.5)
                busy = [p for p in busy if not _port_free(p)]
            if busy:
                raise DevEnvError(
                    f"broker {i} of {name} cannot restart: its port {busy[0]} is taken by another process; free it "
                    f"(the cluster's quorum names that port in every broker's {_RECORD})"
                )
        else:
            preferred_port = preferred_port or _free_base(brokers)
            want = preferred_port + _PORT_STEP * (i - 1)
            port = _pick_port(want, taken)
            ports[i] = (port, _pick_port(want + 1, taken | {port}))
        taken |= set(ports[i])
    voters = ",".join(f"{i}@{LOOPBACK}:{ports[i][1]}" for i in ids)
    cluster_id_file = home / "cluster-id"
    if not cluster_id_file.exists():
        cluster_id_file.write_text(_random_cluster_id() + "\n")
    cluster_id = cluster_id_file.read_text().strip()
    (home / _BROKERS).write_text(json.dumps({"brokers": ids}) + "\n")

    started: list[tuple[LocalCluster, subprocess.Popen[bytes]]] = []
    records: dict[int, LocalCluster] = {}
    for i in ids:
        before = previous[i]
        if before is not None and is_running(before):
            records[i] = before
            continue
        if before is not None and before.pid is not None and _alive(before):
            _terminate(before.pid, grace=10)
        bhome = home / f"broker-{i}"
        (bhome / "logs").mkdir(parents=True, exist_ok=True)
        port, controller = ports[i]
        config = bhome / "server.properties"
        config.write_text(_broker_properties(bhome, i, port, controller, voters, brokers, options))
        _write_log_config(bhome, version)
        if not (bhome / "data" / "meta.properties").exists():
            _format_broker(libs, bhome, config, cluster_id)
        with (bhome / "logs" / "kafka.out").open("ab") as out:
            proc = subprocess.Popen(
                [*_java(libs, bhome, version, options.heap), "kafka.Kafka", str(config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=bhome,
            )  # fmt: skip
        record = LocalCluster(
            name=f"{name}-{i}", version=version, home=str(bhome), port=port, controller_port=controller,
            pid=proc.pid, authorizer=options.authorizer, started_at=time.time(),
        )  # fmt: skip
        (bhome / _RECORD).write_text(json.dumps(asdict(record), indent=2) + "\n")
        records[i] = record
        started.append((record, proc))
    for record, proc in started:
        _wait_ready(record, proc, timeout)
    if started:
        _wait_brokers_registered(records[ids[0]], brokers, timeout)
    return [records[i] for i in ids]


def stop_brokers(home: Path, grace: float = 30.0) -> bool:
    """Stop every broker of the cluster in `home` (one or many); whether any was running."""
    homes = broker_homes(home.resolve())
    if not homes:
        return stop(home, grace)
    records = [r for r in (read_record(h) for h in homes) if r is not None and r.pid is not None]
    alive = [r.pid for r in records if r.pid is not None and _alive(r)]
    for pid in alive:  # all at once: a quorum stopped one by one waits at each step for the ones still up
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    for pid in alive:
        _terminate(pid, grace)
    return bool(alive)


def broker_states(home: Path) -> list[BrokerState]:
    """Each broker of the cluster in `home`: id, port, pid and whether it runs (one entry for a single broker)."""
    home = home.resolve()
    homes = broker_homes(home)
    if not homes:
        record = read_record(home)
        return [] if record is None else [BrokerState(1, record.port, record.pid, is_running(record))]
    states = []
    for i, h in enumerate(homes, start=1):
        record = read_record(h)
        if record is not None:
            states.append(BrokerState(i, record.port, record.pid, is_running(record)))
    return states


def bootstrap_of(records: list[LocalCluster]) -> str:
    return ",".join(r.bootstrap_servers for r in records)


#: Multi-broker clusters take their ports in blocks of this many, aligned, so that two blocks never overlap.
_PORT_BLOCK = 100


def _free_base(brokers: int) -> int:
    """A base port below the ephemeral range (32768 and up on Linux) with each broker's two ports free: a broker
    that restarts must find its ports again, and an ephemeral one may meanwhile be any client's local port.

    The base starts an aligned block of `_PORT_BLOCK` ports that this process claims (`_claim`) first: two
    clusters started at the same moment (two test workers) both see the same ports free until a broker binds
    them, and with overlapping ranges a broker of one joined the other's quorum."""
    import random

    if brokers * _PORT_STEP > _PORT_BLOCK:
        raise DevEnvError(f"at most {_PORT_BLOCK // _PORT_STEP} brokers per cluster, not {brokers}")
    for _ in range(200):
        base = random.randrange(10000, 32000 - _PORT_BLOCK, _PORT_BLOCK)
        if all(_port_free(base + _PORT_STEP * i + k) for i in range(brokers) for k in (0, 1)) and _claim(base):
            return base
    raise DevEnvError(f"no free loopback ports for {brokers} brokers between 10000 and 32000")


def _claims_folder() -> Path:
    import tempfile

    return Path(tempfile.gettempdir()) / "kmirror-port-claims"


def _claim(base: int) -> bool:
    """Claims the port block at `base` for this process among the processes of this machine: a file per block
    naming the claiming pid, linked into place whole (a claim is never seen half written). A claim of a process
    that is gone is taken over; this process's own claims hold until it exits (a few blocks per test session)."""
    folder = _claims_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / str(base)
    mine = folder / f".{base}.{os.getpid()}"
    mine.write_text(f"{os.getpid()}\n")
    try:
        for _ in range(2):
            try:
                os.link(mine, path)
                return True
            except FileExistsError:
                try:
                    owner = int(path.read_text().strip())
                except (OSError, ValueError):
                    owner = 0
                if owner and alive(owner):
                    return False
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # the claim of a process that is gone: take it over
        return False
    finally:
        mine.unlink(missing_ok=True)


def _broker_properties(
    home: Path, node_id: int, port: int, controller_port: int, voters: str, brokers: int, options: BrokerOptions
) -> str:
    """`_server_properties` of one broker of a quorum of `brokers`, with its id, the voters and replicated internals."""
    lines = dict(
        line.split("=", 1) for line in _server_properties(home, port, controller_port, None, options).splitlines()
    )
    rf = str(min(3, brokers))
    min_isr = str(max(1, min(3, brokers) - 1))
    lines.update(
        {
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            # A broker that comes back catches up before it leads again (rolling restarts lose nothing).
            "unclean.leader.election.enable": "false",
            "controlled.shutdown.enable": "true",
        }
    )
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def _format_broker(libs: Path, home: Path, config: Path, cluster_id: str) -> None:
    cmd = [_java_bin(), "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format",
           "-t", cluster_id, "-c", str(config), "--ignore-formatted"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=home, check=False)
    if result.returncode != 0:
        raise DevEnvError(f"formatting Kafka storage in {home / 'data'} failed:\n{result.stdout}{result.stderr}")


def _wait_brokers_registered(any_broker: LocalCluster, brokers: int, timeout: float) -> None:
    """Wait until the cluster's metadata lists all `brokers` (a topic of RF N can be created only then)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": any_broker.bootstrap_servers, "log_level": 0})
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            seen = len(admin.list_topics(timeout=5).brokers)
            if seen >= brokers:
                return
        time.sleep(0.5)
    raise DevEnvError(f"only {seen} of {brokers} brokers of {any_broker.name} registered within {timeout:.0f}s")
