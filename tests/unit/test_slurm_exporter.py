"""corral's Slurm exporter: parsers on captured Slurm 22.05 output (and hand-made shapes), the
collector end to end with an injected command runner, and the HTTP server."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from corral.node import slurm_exporter as E
from corral.node import slurm_exporter_parse as P

FIX = Path(__file__).parent.parent / "fixtures" / "slurm_exporter"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


@pytest.mark.parametrize("state,want", [("idle", "idle"), ("mixed", "mix"), ("allocated", "alloc"),
                                        ("draining", "drain"), ("drained", "drain"), ("mixed+drain", "drain"),
                                        ("down*", "down"), ("down+drain", "down"), ("idle*", "idle"),
                                        ("completing", "alloc"), ("future", "other"), ("idle~", "idle"),
                                        ("reserved", "other"), ("inval", "other")])
def test_normalize_state(state, want):
    assert P.normalize_state(state) == want


def test_sinfo_mixed_captured():
    nodes = P.parse_sinfo(fixture("sinfo_2205_mixed.txt"))
    # every CPU of gpu01 is allocated (job 5 was backfilled) though 2 of its 4 GPUs are free
    assert nodes["gpu01"].state == "alloc" and nodes["gpu01"].gpus == {"h100": 4}
    assert nodes["gpu01"].gpus_alloc == {"h100": 2} and nodes["gpu01"].reason is None
    assert nodes["gpu02"].state == "drain" and nodes["gpu02"].reason == "corral: gpu count 3 < 4"
    assert nodes["gpu02"].gpus_alloc == {"h100": 4} and nodes["gpu02"].partitions == ["gpu"]
    assert P.partition_gpus(nodes) == {("gpu", "h100", "alloc"): 6, ("gpu", "h100", "idle"): 2,
                                       ("gpu", "h100", "unavailable"): 0}


def test_sinfo_down_captured():
    nodes = P.parse_sinfo(fixture("sinfo_2205_down.txt"))
    assert (nodes["gpu01"].state, nodes["gpu01"].reason) == ("down", "admin: replacing DIMM")
    assert (nodes["gpu02"].state, nodes["gpu02"].reason) == ("drain", "corral: gpu count 3 < 4")
    assert P.partition_gpus(nodes)[("gpu", "h100", "unavailable")] == 8


def test_sinfo_handmade_shapes():
    nodes = P.parse_sinfo(fixture("handmade_sinfo_multi.txt"))
    assert nodes["dgx01"].partitions == ["batch", "long"] and nodes["dgx01"].gpus == {"h100": 8}
    assert nodes["mix01"].gpus == {"a100": 2, "l4": 1} and not nodes["mix01"].responding  # shard ignored
    assert nodes["old01"].gpus == {"untyped": 4} and nodes["old01"].gpus_alloc == {"untyped": 2}
    assert nodes["old01"].state == "drain" and nodes["old01"].reason == "corral: xid 79 on gpu 1"
    assert nodes["cpu01"].state == "down" and nodes["cpu01"].gpus == {} and nodes["cpu02"].state == "alloc"
    assert nodes["new01"].state == "other"
    gpus = P.partition_gpus(nodes)
    assert gpus[("batch", "h100", "alloc")] == 3 and gpus[("long", "h100", "idle")] == 5
    assert gpus[("batch", "h100", "unavailable")] == 8  # new01 is FUTURE
    assert gpus[("batch", "untyped", "unavailable")] == 2 and gpus[("batch", "untyped", "alloc")] == 2


@pytest.mark.parametrize("text,want", [("gpu:h100:8(S:0-1)", {"h100": 8}), ("(null)", {}), ("gpu:2", {"untyped": 2}),
                                       ("gpu:a100:1(IDX:0),gpu:h100:0(IDX:N/A)", {"a100": 1, "h100": 0}),
                                       ("shard:8,gpu:l4:1", {"l4": 1})])
def test_parse_gres(text, want):
    assert P.parse_gres(text) == want


def test_squeue_captured():
    jobs = P.parse_squeue(fixture("squeue_2205_mixed.txt"))
    assert [(j.id, j.state, j.gpus) for j in jobs] == [("4", "pending", 8), ("3", "pending", 8), ("5", "running", 0),
                                                      ("1", "running", 2), ("2", "running", 4)]
    assert jobs[1].reason == "Priority" and jobs[2].reason is None and jobs[0].account == "research"


def test_sdiag_captured():
    values, rpcs = P.parse_sdiag(fixture("sdiag_2205.txt"))
    assert values["server_threads"] == 3 and values["jobs_submitted"] == 5 and values["jobs_started"] == 3
    assert values["scheduler_cycle_last_seconds"] == pytest.approx(56e-6)
    assert values["scheduler_cycle_mean_seconds"] == pytest.approx(595e-6)
    assert values["scheduler_cycles"] == 3 and values["scheduler_queue_length"] == 3
    assert values["backfill_cycle_last_seconds"] == pytest.approx(596e-6) and values["backfill_cycles"] == 1
    assert values["backfill_depth_mean"] == 3 and values["backfilled_jobs"] == 1
    assert rpcs["REQUEST_SUBMIT_BATCH_JOB"] == (5, pytest.approx(7340e-6))


def test_ping():
    assert P.ping_up(fixture("scontrol_ping_up.txt"))
    assert not P.ping_up(fixture("controller_down.txt"))


def runner(outputs: dict[str, tuple[int, str]]):
    def run(argv, timeout):
        return outputs[argv[0]]
    return run


HEALTHY = {"sinfo": (0, fixture("sinfo_2205_mixed.txt")), "squeue": (0, fixture("squeue_2205_mixed.txt")),
           "sdiag": (0, fixture("sdiag_2205.txt")), "scontrol": (0, fixture("scontrol_ping_up.txt")),
           "sacctmgr": (0, "vcluster\n")}


def scrape(outputs) -> dict[str, list]:
    registry = CollectorRegistry()
    registry.register(E.SlurmCollector(run=runner(outputs)))
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def values(samples, **match) -> list[float]:
    return [s.value for s in samples if all(s.labels.get(k) == v for k, v in match.items())]


def test_collector_end_to_end():
    m = scrape(HEALTHY)
    assert values(m["corral_slurm_slurmctld_up"]) == [1] and values(m["corral_slurm_slurmdbd_up"]) == [1]
    assert sum(values(m["corral_slurm_nodes"])) == 2 and values(m["corral_slurm_nodes"], state="drain") == [1]
    assert values(m["corral_slurm_node_drained"], node="gpu02", reason="corral: gpu count 3 < 4") == [1]
    assert sum(values(m["corral_slurm_partition_gpus"])) == 8
    assert values(m["corral_slurm_jobs"], state="pending", partition="gpu", account="research") == [2]
    assert values(m["corral_slurm_job_gpus"], state="running") == [6]
    assert values(m["corral_slurm_pending_job_gpus"], reason="Priority") == [8]
    assert values(m["corral_slurm_jobs_submitted"]) == [5]
    assert all(v == 0 for v in values(m["corral_slurm_command_error"]))


def test_an_admin_drain_reason_is_not_a_label():
    m = scrape(dict(HEALTHY, sinfo=(0, fixture("sinfo_2205_down.txt"))))
    assert {(s.labels["node"], s.labels["reason"]) for s in m["corral_slurm_node_drained"]} == {
        ("gpu01", "other"), ("gpu02", "corral: gpu count 3 < 4")}


def test_controller_down_keeps_the_exporter_answering():
    down = fixture("controller_down.txt")
    m = scrape({"sinfo": (1, down), "squeue": (1, down), "sdiag": (124, "timed out after 10 s"),
                "scontrol": (1, down), "sacctmgr": (1, down)})
    assert values(m["corral_slurm_slurmctld_up"]) == [0] and values(m["corral_slurm_slurmdbd_up"]) == [0]
    assert "corral_slurm_nodes" not in m and "corral_slurm_jobs" not in m
    assert values(m["corral_slurm_command_error"], command="sdiag") == [1]


def test_run_command_bounds_and_reports():
    assert E.run_command(["sh", "-c", "echo hi"], 5) == (0, "hi\n")
    assert E.run_command(["sleep", "5"], 0.2)[0] == 124
    assert E.run_command(["/nonexistent/sinfo"], 1)[0] == 127


def test_http_server_serves_metrics():
    registry = CollectorRegistry()
    registry.register(E.SlurmCollector(run=runner(HEALTHY)))
    server = E.make_server_for("127.0.0.1:0", registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            body = r.read().decode()
        assert 'corral_slurm_node_gpus{node="gpu01",type="h100"} 4.0' in body
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
