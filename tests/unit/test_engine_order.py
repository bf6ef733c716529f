"""engine/execute.apply's order across nodes: each node goes through its deploys on its own, a deploy
waits only for what it declares (the components declarations, components/), or for everything earlier when it declares
nothing; a node that breaks never leaves the others waiting. The ops are stand-ins that sleep
cooperatively (gevent), so the schedule is what is tested, not SSH."""

from __future__ import annotations

import time
from types import SimpleNamespace

import gevent
import gevent.pool
import pytest

from corral.deploy import components
from corral.engine import execute
from corral.engine.results import RunResult
from corral.engine.runner import waits_of


class Host:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeRun:
    def __init__(self, plan: dict[str, list[list[float]]], names: list[str], waits):
        self.hosts = [Host(n) for n in plan]
        self.state = SimpleNamespace(inventory=self.hosts, activated_hosts=set(self.hosts), failed_hosts=set(),
                                     pool=gevent.pool.Pool(2), is_executing=False)
        # op "hash" = "node/deploy/k:seconds"
        self.phases = {n: [[f"{n}/{i}/{k}:{s}" for k, s in enumerate(ops)] for i, ops in enumerate(deploys)]
                       for n, deploys in plan.items()}
        self.deploy_names, self.waits = names, waits
        self.result = RunResult(run_id="x", command="apply", mode="apply", spec_hash="h", started="t")
        self.events: list[tuple[str, str, float, float]] = []  # (node, op, start, end)
        self.t0 = time.monotonic()

        self.nodes = {h.name: SimpleNamespace(error=None, error_kind=None) for h in self.hosts}

    def record(self, host, op_hash, status, **kw):
        self.events.append((host.name, op_hash, -1.0, -1.0))

    def node(self, name):
        return self.nodes[name]


@pytest.fixture
def fake_ops(monkeypatch):
    def one(run, host, op_hash):
        start = time.monotonic() - run.t0
        if op_hash.endswith(":boom"):
            raise RuntimeError("an engine bug")
        gevent.sleep(float(op_hash.rsplit(":", 1)[1]))
        run.events.append((host.name, op_hash.split(":")[0], start, time.monotonic() - run.t0))
    monkeypatch.setattr(execute, "_apply_one", one)


def _span(run, node: str, deploy: int) -> tuple[float, float]:
    evs = [e for e in run.events if e[0] == node and e[1].split("/")[1] == str(deploy)]
    return min(e[2] for e in evs), max(e[3] for e in evs)


def test_a_local_deploy_does_not_wait_for_slower_nodes(fake_ops):
    run = FakeRun({"ctl": [[0.4], [0.05]], "gpu": [[0.05], [0.05]]}, ["packages", "health"], [(), ()])
    execute.apply(run)
    assert _span(run, "gpu", 1)[1] < _span(run, "ctl", 0)[1]  # gpu done with both before ctl's first ends
    timing = {p["name"]: p for p in run.result.timing}
    assert timing["packages"]["start"] < 0.02 and timing["packages"]["s"] >= 0.39
    assert timing["health"]["waited"] == {}


def test_a_waiting_deploy_starts_when_the_nodes_with_ops_in_what_it_waits_for_are_done(fake_ops):
    # deploy 1 (controller) has ops on ctl only; deploy 2 (compute) on gpu waits for it; login's slow
    # deploy 0 holds nobody: it has no ops in the controller deploy
    run = FakeRun({"ctl": [[0.2], [0.2], []], "gpu": [[0.05], [], [0.05]], "login": [[0.8], [], []]},
                  ["packages", "slurm controller", "slurm compute"], [(), (), (1,)])
    execute.apply(run)
    ctl_end = _span(run, "ctl", 1)[1]
    gpu_start, gpu_end = _span(run, "gpu", 2)
    assert gpu_start >= ctl_end - 0.005
    assert gpu_end < _span(run, "login", 0)[1]  # login still installing: not waited for
    compute = next(p for p in run.result.timing if p["name"] == "slurm compute")
    assert compute["waited"]["gpu"] >= 0.3


def test_an_undeclared_deploy_is_a_barrier(fake_ops):
    run = FakeRun({"a": [[0.3], [0.01]], "b": [[0.01], [0.01]]}, ["one", "two"], [(), None])
    execute.apply(run)
    assert _span(run, "b", 1)[0] >= _span(run, "a", 0)[1] - 0.005


def test_a_node_that_breaks_leaves_no_one_waiting(fake_ops):
    run = FakeRun({"ctl": [["boom"], [0.01]], "gpu": [[0.01], [0.01]]}, ["accounting", "slurm compute"],
                  [(), (0,)])
    with gevent.Timeout(5):
        execute.apply(run)
    assert any(e[0] == "gpu" and e[1].startswith("gpu/1") for e in run.events)
    assert run.nodes["ctl"].error == "ctl: RuntimeError: an engine bug" and run.nodes["ctl"].error_kind == "engine-error"
    assert ("ctl", "ctl/1/0:0.01", -1.0, -1.0) in run.events  # its later op: recorded as not run


def test_every_component_says_what_it_waits_for_and_only_earlier_deploys():
    for deploys in (components(SimpleNamespace(spec=SimpleNamespace(scheduler="slurm"))),
                    components(SimpleNamespace(spec=SimpleNamespace(scheduler="kubernetes")))):
        names = [d.deploy_name for d in deploys]
        assert len(set(names)) == len(names), names
        for i, d in enumerate(deploys):  # the declaration's name is the deploy's (journal op names)
            assert d.component.name == d.deploy_name
            assert set(d.waits_for) <= set(names[:i]), f"{d.deploy_name} waits for a later or unknown deploy"
        assert all(w is not None for w in waits_of(deploys))
        slurm = dict(zip(names, waits_of(deploys)))
        if "slurm compute" in slurm:
            assert names[slurm["slurm compute"][0]] == "slurm controller"
