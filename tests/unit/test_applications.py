"""Many flows, one Spark application: the keys (`spark.application`, `flows[].spark.application`), the digests an
upgrade must keep, the plan rows that say what a change does to the other flows, the folder contract between the
runner and the application's driver, and the driver's reconciliation of what runs against what is requested."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from reconciler.errors import KmirrorError
from reconciler.jobcontract.application import FlowRequest, application_folder
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.plan.applications import application_effect, stop_effect
from reconciler.replication.application import ApplicationDriver, Reconciliation, reconcile
from reconciler.resources.deployments import LocalDeployment, deployment_of
from reconciler.runners import LocalRunner
from reconciler.runners.common import HOST, read_json, write_json
from reconciler.runners.local_apps import application_digest
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState

pytestmark = pytest.mark.unit


def _state(spark: str = "", flows: dict[str, str] | None = None) -> DesiredState:
    flows = flows if flows is not None else {"a": "", "b": "", "c": ""}
    body = "".join(
        f"  - name: {name}\n    source: src\n    target: dst\n    topics: {{include: ['{name}\\\\..*']}}\n"
        + (f"    {extra}\n" if extra else "")
        for name, extra in flows.items()
    )
    spark_block = spark if "deploy:" in spark else "deploy: local\n" + spark
    text = f"""
version: 1
clusters:
  src: {{bootstrap_servers: "127.0.0.1:1"}}
  dst: {{bootstrap_servers: "127.0.0.1:2"}}
state: {{cluster: dst}}
spark:
{textwrap.indent(spark_block, "  ")}
flows:
{body}"""
    return load_text(text).state


def test_flows_name_their_application_globally_or_each() -> None:
    ds = _state("application: fleet", {"a": "", "b": "spark: {application: other}", "c": ""})
    assert [ds.application_of(f) for f in ds.flows] == ["fleet", "other", "fleet"]
    assert _state().application_of(_state().flows[0]) is None


def test_a_flow_in_an_application_of_its_own_keeps_its_digest_after_the_upgrade() -> None:
    """The effective spec has no application key unless one is set: existing deployments are not redeployed."""
    ds = _state()
    assert "application" not in ds.flow_effective_spec("a")["spark"]
    assert "spark" not in ds.flow_effective_spec("a")["flow"]
    grouped = _state("application: fleet")
    assert grouped.flow_effective_spec("a")["spark"]["application"] == "fleet"
    assert grouped.flow_digest("a") != ds.flow_digest("a")  # moving into an application moves its query


def test_a_bad_application_name_is_refused_with_where_it_is() -> None:
    with pytest.raises(KmirrorError) as err:
        _state("application: 'two words'")
    assert "application" in str(err.value) and "two words" in str(err.value)


def test_yarn_refuses_an_application_for_now() -> None:
    shared = 'deploy: standalone\nmaster: "spark://h:7077"\nrest_url: "http://h:6066"\napplication: fleet\n'
    assert _state(shared + "checkpoint_root: /shared/cp").spark.application == "fleet"
    with pytest.raises(KmirrorError, match="needs deploy 'local' or 'standalone' for now"):
        _state("deploy: yarn\nmaster: yarn\ncheckpoint_root: hdfs://nn:8020/cp\napplication: fleet")


def test_the_plan_says_only_the_changed_flow_restarts() -> None:
    ds = _state("application: fleet")
    spec = ds.flow_effective_spec("b")
    said = application_effect(ds, ds.flow("b"), "redeploy", spec, spec)
    assert said == "; in application fleet: flow b restarts, flows a and c keep running"


def test_the_plan_says_the_application_redeploys_when_its_settings_change() -> None:
    before = _state("application: fleet").flow_effective_spec("b")
    ds = _state("application: fleet\nconf: {spark.driver.memory: 2g}")
    said = application_effect(ds, ds.flow("b"), "redeploy", before, ds.flow_effective_spec("b"))
    assert said == "; application fleet redeploys (its Spark settings changed): flows a, b and c restart"


def test_the_plan_says_every_flow_restarts_when_the_application_runs_none() -> None:
    """After the application's driver died (kill -9, the OOM killer), no flow of it keeps running."""
    ds = _state("application: fleet")
    spec = ds.flow_effective_spec("b")
    said = application_effect(ds, ds.flow("b"), "restart", spec, spec, {"a", "b", "c"})
    assert said == "; application fleet runs none of its flows: flows a, b and c restart, each on its checkpoint"
    said = application_effect(ds, ds.flow("b"), "restart", spec, spec, {"b"})  # its query alone stopped
    assert said == "; in application fleet: flow b restarts, flows a and c keep running"
    said = application_effect(ds, ds.flow("b"), "restart", spec, spec, {"a", "b"})
    assert said == "; in application fleet: flows a and b restart, flow c keeps running"


def test_the_plan_says_a_flow_moves_into_an_application() -> None:
    before = _state().flow_effective_spec("b")
    ds = _state("application: fleet")
    said = application_effect(ds, ds.flow("b"), "redeploy", before, ds.flow_effective_spec("b"))
    assert said == "; moves into application fleet on its checkpoint, flows a and c keep running"
    assert application_effect(_state(), _state().flow("b"), "redeploy", before, before) == ""


def test_the_plan_says_a_stopped_flow_stops_only_its_query() -> None:
    last = _state("application: fleet").flow_effective_spec("b")
    ds = _state("application: fleet", {"a": "", "b": "enabled: false", "c": ""})
    assert stop_effect(ds, "b", last) == "; only its query in application fleet stops, flows a and c keep running"
    assert stop_effect(ds, "b", _state().flow_effective_spec("b")) == ""


def test_reconcile_restarts_only_the_changed_flow_and_waits_for_a_stopping_one() -> None:
    running = {"a": "d1", "b": "d1", "c": "d1"}
    todo = reconcile(running, set(), {"a": "d1", "b": "d2", "c": "d1"})
    assert (todo.stop, todo.start) == (("b",), ())
    # b still stopping: no second stop, and no start on its checkpoint until its query ended
    assert reconcile(running, {"b"}, {"a": "d1", "b": "d2", "c": "d1"}) == Reconciliation((), ())
    ended = {"a": "d1", "c": "d1"}
    assert reconcile(ended, set(), {"a": "d1", "b": "d2", "c": "d1"}).start == ("b",)
    assert reconcile(running, set(), {"a": "d1", "c": "d1"}).stop == ("b",)


def test_the_folder_holds_one_request_per_flow_and_a_stop_request_withdraws_it(tmp_path: Path) -> None:
    app = application_folder(tmp_path, "fleet")
    for name in ("a", "b"):
        folder = app.flow(name)
        folder.path.mkdir(parents=True)
        folder.spec.write_text("{}")
        FlowRequest(name, folder, f"sha256:{name}", f"/cp/{name}", resume_from_syncs=name == "b").write()
    assert {n: (r.digest, r.resume_from_syncs) for n, r in app.requests().items()} == {
        "a": ("sha256:a", False),
        "b": ("sha256:b", True),
    }
    app.flow("a").stop.write_text("stop")
    assert list(app.requests()) == ["b"]
    assert app.path == tmp_path / "_apps" / "fleet"


def test_the_runner_finds_a_flow_of_an_application_from_this_hosts_folders(tmp_path: Path) -> None:
    """A checkout without the state record still sees the flow in its application's folder; its stop leaves a stop
    request for the application (only this flow's query) and marks the record stopped."""
    runner = LocalRunner(tmp_path, state_topic="_kmirror.state", state_key="_kmirror.state@c1", root=tmp_path)
    folder = runner.apps.folder("fleet").flow("b")
    folder.path.mkdir(parents=True)
    folder.spec.write_text("{}")
    record = LocalDeployment(flow="b", host=HOST, pid=2**22 + 7, digest="sha256:b", folder=str(folder.path),
                             checkpoint=str(tmp_path / "cp"), started_at=1.0, application="fleet")  # fmt: skip
    write_json(folder.runner, record.model_dump(mode="json"))
    assert runner.apps.folder("fleet").path == tmp_path / "jobs" / "_kmirror.state@c1" / "_apps" / "fleet"
    assert set(runner.status().jobs) == {"b"}
    job = runner.job("b")
    assert job is not None and job.application == "fleet" and not job.running
    assert job.log == runner.apps.folder("fleet").log
    runner.stop("b")
    assert folder.stop.is_file()
    written = deployment_of(read_json(folder.runner))
    assert isinstance(written, LocalDeployment) and written.stopped_at is not None and written.application == "fleet"


def test_a_driver_runs_only_the_requests_for_its_settings(tmp_path: Path) -> None:
    """A redeployed application's driver must not start a flow whose request is for the old settings: its own deploy
    in the same apply brings its new spec, and starting it now would restart its query twice in one apply."""
    app = application_folder(tmp_path, "fleet")
    stamps = {"a": "sha256:new", "b": "sha256:old", "c": None}
    for name, stamp in stamps.items():
        folder = app.flow(name)
        folder.path.mkdir(parents=True)
        folder.spec.write_text("{}")
        FlowRequest(name, folder, f"sha256:{name}", f"/cp/{name}", application_digest=stamp).write()
    assert {n: r.application_digest for n, r in app.requests().items()} == stamps
    assert sorted(ApplicationDriver(app, "sha256:new")._wanted(app.requests())) == ["a", "c"]
    assert sorted(ApplicationDriver(app, None)._wanted(app.requests())) == ["a", "b", "c"]  # an older runner's start


def test_a_redeployed_application_is_asked_only_for_the_flows_its_settings_run(tmp_path: Path) -> None:
    """Before a new driver starts: a flow whose written spec runs with the new settings and jars (only the jars
    changed) is asked of it; one whose spec has other Spark settings waits for its own deploy."""
    runner = LocalRunner(tmp_path, state_topic="_kmirror.state", state_key="_kmirror.state@c1", root=tmp_path)
    app = runner.apps.folder("fleet")
    old = _state("application: fleet\nconf: {spark.kmirror.restartBackoffMaxMs: '30000'}\n")
    new = _state("application: fleet\nconf: {spark.kmirror.restartBackoffMaxMs: '20000'}\n")
    for name, desired in (("b", new), ("c", old)):
        folder = app.flow(name)
        folder.path.mkdir(parents=True)
        effective = EffectiveSpec.of(desired, name)
        JobSpec.for_deploy(name, effective, "sha256:x", tmp_path, "_kmirror.state", None).write(folder.spec)
        FlowRequest(name, folder, "sha256:x", f"/cp/{name}", application_digest="sha256:before").write()
    app_digest = application_digest(EffectiveSpec.of(new, "a"))
    assert app_digest != application_digest(EffectiveSpec.of(old, "a"))
    runner.apps._restamp(app, app_digest, "a")
    assert {n: r.application_digest for n, r in app.requests().items()} == {"b": app_digest, "c": "sha256:before"}


def test_a_superseded_flow_waits_for_its_next_deploy(tmp_path: Path) -> None:
    """An exactly-once flow superseded by a newer generation stops for good, as a job of its own exits: the driver
    does not start it again after its backoff (it would be superseded again, each time), only once a deploy wrote
    its spec with another generation."""
    app = application_folder(tmp_path, "fleet")
    folder = app.flow("b")
    folder.path.mkdir(parents=True)
    effective = EffectiveSpec.of(_state("application: fleet"), "b")
    JobSpec.for_deploy("b", effective, "sha256:x", tmp_path, "_kmirror.state", None).write(folder.spec)
    FlowRequest("b", folder, "sha256:x", "/cp/b").write()
    request = app.requests()["b"]
    driver = ApplicationDriver(app, None)
    assert not driver._held_superseded(request)
    driver._superseded["b"] = JobSpec.read(folder.spec).generation
    assert driver._held_superseded(request) and driver._held_superseded(request)
    previous = LocalDeployment(flow="b", host=HOST, generation=JobSpec.read(folder.spec).generation)
    JobSpec.for_deploy("b", effective, "sha256:x", tmp_path, "_kmirror.state", previous).write(folder.spec)
    assert not driver._held_superseded(request)  # the deploy's next generation: it starts
    assert "b" not in driver._superseded
