"""`kmirror dev up|down|status`: real local Kafka clusters (3.9 source, 4.x target) for trying kmirror, and with
`--yarn` a local HDFS and YARN (`devenv.yarn_local`) for `spark.deploy: yarn`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from reconciler.devenv import dev_clusters, kafka_local, minio_local, yarn_local
from reconciler.devenv.kafka_local import BrokerOptions

_root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the clusters' data and logs [default: $KMIRROR_DEV_HOME or .kmirror/dev].",
)


@click.group()
def dev() -> None:
    """Local Kafka clusters from Apache's jars (no Docker): `source` runs 3.9, `target` runs 4.x.

    \b
    Examples:
      kmirror dev up
      kmirror dev status --format json
      kmirror dev down
    """


@dev.command()
@_root_option
@click.option("--authorizer", is_flag=True, help="Turn on StandardAuthorizer (super users ANONYMOUS, admin).")
@click.option(
    "--tls",
    is_flag=True,
    help="Add an SSL listener that requires client certificates, with a private CA made for the clusters "
    "(PEM files under ROOT/tls; `dev status --format json` names them).",
)
@click.option(
    "--brokers",
    type=click.IntRange(1, 9),
    default=1,
    show_default=True,
    help="Brokers per cluster (one KRaft quorum of N voters each); `up` again restarts any stopped broker.",
)
@click.option(
    "--schema-registry",
    is_flag=True,
    help="Also start one schema registry per cluster (Apicurio Registry, Confluent API; built with Maven once); "
    "`dev status --format json` names each one's url.",
)
@click.option(
    "--yarn",
    is_flag=True,
    help="Also start a local HDFS and YARN (MiniDFSCluster + MiniYARNCluster, one NodeManager) for "
    '`spark.deploy: yarn`; `dev status --format json` names their addresses and HADOOP_CONF_DIR under "yarn".',
)
@click.option(
    "--s3",
    is_flag=True,
    help="Also start a local S3 (MinIO, built with Go once) with a `kmirror` bucket for `s3a://` checkpoint roots; "
    '`dev status --format json` names its endpoint and the files holding its keys under "s3".',
)
def up(
    root: Path | None, authorizer: bool, tls: bool, brokers: int, schema_registry: bool, yarn: bool, s3: bool
) -> None:
    """Start both clusters (a no-op for one that already runs).

    \b
    Example:
      kmirror dev up && kmirror dev status --format json
      kmirror dev up --tls   # plus an mTLS listener: see "tls" in `kmirror dev status --format json`
      kmirror dev up --yarn  # plus HDFS and YARN: see "yarn" in `kmirror dev status --format json`
      kmirror dev up --s3    # plus MinIO: see "s3" in `kmirror dev status --format json`
    """
    root = (root or dev_clusters.dev_root()).resolve()
    started = time.monotonic()
    if yarn:
        _up_yarn(root)
    if s3:
        _up_s3(root)
    existing = max((len(s.brokers) for s in dev_clusters.status(root)), default=0)
    if brokers > 1 or existing > 1:  # plain `up` on a cluster of N brokers restarts its stopped ones
        if tls:
            raise click.UsageError("--tls is for single-broker clusters for now; leave out --brokers or --tls")
        _up_brokers(root, brokers if brokers > 1 else existing, BrokerOptions(authorizer=authorizer))
        if schema_registry:
            _up_registries(root)
        click.echo(f"ready in {time.monotonic() - started:.1f}s; stop with `kmirror dev down`")
        return
    material = kafka_local.ensure_tls_material(root / "tls") if tls else None
    clusters = dev_clusters.up(root, BrokerOptions(authorizer=authorizer, tls=material))
    for c in clusters:
        click.echo(f"{c.name:<7} Kafka {c.version:<6} {c.bootstrap_servers}  (logs: {c.log_dir})")
        if c.tls_bootstrap_servers:
            click.echo(
                f"{'':<7} TLS (client certificate required) on {c.tls_bootstrap_servers}; "
                "`kmirror dev status --format json` names the CA and client PEM files"
            )
    if schema_registry:
        _up_registries(root)
    click.echo(f"ready in {time.monotonic() - started:.1f}s; stop with `kmirror dev down`")


def _up_yarn(root: Path) -> None:
    cluster = yarn_local.start(root / "yarn")
    click.echo(f"yarn    ResourceManager {cluster.resource_manager}  HDFS {cluster.hdfs}")
    click.echo(f"{'':<7} HADOOP_CONF_DIR={cluster.hadoop_conf_dir}")


def _up_s3(root: Path) -> None:
    server = minio_local.start(root / "s3")
    click.echo(f"s3      MinIO {server.endpoint}  bucket {server.bucket}  (checkpoint_root: s3a://{server.bucket}/...)")
    click.echo(f"{'':<7} keys: {server.keys} (`set -a; . {server.keys / 'aws.env'}` exports them for a local job)")


def _up_brokers(root: Path, brokers: int, options: BrokerOptions) -> None:
    for name, records in zip(("source", "target"), dev_clusters.up_brokers(root, brokers, options), strict=True):
        bootstrap = ",".join(r.bootstrap_servers for r in records)
        click.echo(f"{name:<7} Kafka {records[0].version:<6} {bootstrap}  ({len(records)} brokers)")


def _up_registries(root: Path) -> None:
    from reconciler.devenv import schema_registry as registries

    for d in dev_clusters.DEV_CLUSTERS:
        registry = registries.start(d.name, root / d.name)
        click.echo(f"{d.name:<7} schema registry (Apicurio {registries.APICURIO_VERSION}) {registry.url}")


@dev.command()
@click.option("--schema-registry", is_flag=True, help="Also build the dev schema registry (Maven, ~210 MB once).")
@click.option("--s3", is_flag=True, help="Also fetch S3A (hadoop-aws, ~18 MB) and build MinIO with Go (~150 MB once).")
def fetch(schema_registry: bool, s3: bool) -> None:
    """Fetch every jar kmirror runs (both Kafka versions, the Spark Kafka connector) into the cache, and record
    the class archive local jobs' drivers start from (Java's AppCDS: Spark's classes, parsed and verified once);
    archives recorded for a pyspark install or JDK that is gone or changed are deleted.

    The cache is $KMIRROR_CACHE (default ~/.cache/kmirror); Maven must be on PATH.

    \b
    Example:
      kmirror dev fetch && du -sh ~/.cache/kmirror
    """
    from reconciler.devenv import jars

    for version in (jars.KAFKA_SOURCE_VERSION, jars.KAFKA_TARGET_VERSION):
        click.echo(f"Kafka {version}: {jars.kafka_libs(version)}")
    connector = jars.spark_kafka_jars()
    click.echo(f"Spark Kafka connector: {connector[0].parent if connector else '(none needed)'}")
    from reconciler.artifacts import ensure_driver_archive, prune_archives
    from reconciler.artifacts.driver_home import driver_home, prune_homes

    home = driver_home()
    click.echo(f"Spark home of local jobs (pyspark's, without MLlib): {home}")
    for gone in prune_homes(home):
        click.echo(f"deleted {gone.name}: made for a pyspark install that is gone or changed")
    archive = ensure_driver_archive()
    click.echo(f"Spark driver class archive (local jobs start 3-4 s sooner): {archive}")
    for gone in prune_archives(archive):
        click.echo(f"deleted {gone.name}: recorded for a pyspark install or JDK that is gone or changed")
    if schema_registry:
        from reconciler.devenv import schema_registry as registries

        click.echo(f"schema registry (Apicurio {registries.APICURIO_VERSION}): {registries.ensure_built()}")
    if s3:
        from reconciler.artifacts.jars import hadoop_aws_jars

        click.echo(f"S3A (hadoop-aws) for s3a:// checkpoints: {hadoop_aws_jars()[0].parent}")
        click.echo(f"MinIO {minio_local.MINIO_VERSION}: {minio_local.minio_binary()}")


@dev.command()
@_root_option
def demo(root: Path | None) -> None:
    """Run the main job end to end: clusters, example data, plan, apply (the PySpark job), status to lag 0.

    \b
    Example:
      kmirror dev demo && kmirror status -f .kmirror/dev/demo/kmirror.yaml --watch 2
    """
    from reconciler.devenv import demo as demo_run

    demo_run.run((root or dev_clusters.dev_root()).resolve(), say=click.echo)


@dev.command()
@_root_option
def down(root: Path | None) -> None:
    """Stop the demo's replication jobs and both clusters (their data is kept for the next `up`).

    \b
    Example:
      kmirror dev down && rm -rf .kmirror/dev   # and forget their data
    """
    root = (root or dev_clusters.dev_root()).resolve()
    from reconciler.devenv.demo import demo_dir
    from reconciler.jobcontract.layout import local_state_keys
    from reconciler.runners import LocalRunner
    from reconciler.spec.defaults import DEFAULT_STATE_TOPIC

    # the demo's file names no state topic; its jobs are keyed by the (maybe already stopped) target's cluster id
    for key in local_state_keys(DEFAULT_STATE_TOPIC):
        runner = LocalRunner(demo_dir(root), state_topic=DEFAULT_STATE_TOPIC, state_key=key)
        for flow, info in runner.status().jobs.items():
            if info.running:
                runner.stop(flow)
                click.echo(f"stopped the replication job of flow {flow}")
    from reconciler.devenv import schema_registry as registries

    for d in dev_clusters.DEV_CLUSTERS:
        if registries.stop(root / d.name):
            click.echo(f"stopped the schema registry of {d.name}")
    stopped = dev_clusters.down(root)
    if yarn_local.stop(root / "yarn"):
        stopped.append("yarn")
    if minio_local.stop(root / "s3"):
        stopped.append("s3")
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "no dev cluster was running")


@dev.command()
@_root_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(root: Path | None, fmt: str) -> None:
    """Show each cluster: running or not, its Kafka version and bootstrap address.

    \b
    Example:
      kmirror dev status --format json | jq -r .clusters.target.bootstrap_servers
    """
    statuses = dev_clusters.status((root or dev_clusters.dev_root()).resolve())
    if fmt == "json":
        doc: dict[str, dict[str, dict[str, object]]] = {
            "clusters": {
                s.name: {
                    "bootstrap_servers": s.bootstrap_servers,
                    "kafka_version": s.version,
                    "running": s.running,
                    "brokers": [{"id": b.id, "port": b.port, "pid": b.pid, "running": b.running} for b in s.brokers],
                }
                for s in statuses
            }
        }
        _add_tls(doc, (root or dev_clusters.dev_root()).resolve())
        _add_registries(doc, (root or dev_clusters.dev_root()).resolve())
        out: dict[str, object] = dict(doc)
        yarn = _yarn_record((root or dev_clusters.dev_root()).resolve())
        if yarn is not None:
            out["yarn"] = yarn.status()
        s3 = _s3_record((root or dev_clusters.dev_root()).resolve())
        if s3 is not None:
            out["s3"] = s3.status()
        click.echo(json.dumps(out, indent=2))
        return
    from reconciler.devenv import schema_registry as registries

    for s in statuses:
        state = click.style("running", fg="green") if s.running else click.style("stopped", fg="yellow")
        click.echo(f"{s.name:<7} Kafka {s.version:<6} {s.bootstrap_servers or '-':<20} {state}")
        registry = registries.status((root or dev_clusters.dev_root()).resolve() / s.name)
        if registry:
            up = click.style("running", fg="green") if registry["running"] else click.style("stopped", fg="yellow")
            click.echo(f"{'':<7} schema registry {registry['url']}  {up}")
    yarn = _yarn_record((root or dev_clusters.dev_root()).resolve())
    if yarn is not None:
        state = click.style("running", fg="green") if yarn.running else click.style("stopped", fg="yellow")
        click.echo(f"{'yarn':<7} {yarn.resource_manager} {yarn.hdfs} {state}")
    s3 = _s3_record((root or dev_clusters.dev_root()).resolve())
    if s3 is not None:
        state = click.style("running", fg="green") if s3.running else click.style("stopped", fg="yellow")
        click.echo(f"{'s3':<7} {s3.endpoint} bucket {s3.bucket} {state}")


def _yarn_record(root: Path) -> yarn_local.YarnCluster | None:
    """The local HDFS + YARN of `dev up --yarn`, if it was started (and has not been stopped since)."""
    return yarn_local.read_record(root / "yarn")


def _s3_record(root: Path) -> minio_local.LocalS3 | None:
    """The local MinIO of `dev up --s3`, if it was ever started here."""
    return minio_local.read_record(root / "s3")


def _add_tls(doc: dict[str, dict[str, dict[str, object]]], root: Path) -> None:
    """Per cluster started with `--tls`: its TLS listener and the PEM files a client needs for it."""
    for name, entry in doc["clusters"].items():
        record = kafka_local.read_record(root / name)
        tls = kafka_local.tls_status(record) if record else None
        if tls:
            entry["tls"] = tls


def _add_registries(doc: dict[str, dict[str, dict[str, object]]], root: Path) -> None:
    """Per cluster started with `--schema-registry`: `"schema_registry": {"url", "running"}`."""
    from reconciler.devenv import schema_registry as registries

    for name, entry in doc["clusters"].items():
        registry = registries.status(root / name)
        if registry:
            entry["schema_registry"] = registry
