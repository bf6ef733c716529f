"""Output sized for people (issue 54): plan's per-node lines and its total by disruption, the diffs, commands and
skipped components behind -v; a no-op apply on a pipe prints its start and end, not each converged op; `history
--timing` without --run shows the latest run that changed anything."""

from __future__ import annotations

import io

from corral.cli.history_cmd import latest_work
from corral.cli.run_cmd import plan_total, show_plan
from corral.engine.progress import Event, make_reporter
from corral.engine.results import NodeResult, OpResult, RunResult


def _result() -> RunResult:
    r = RunResult(run_id="r1", command="plan", mode="plan", spec_hash="h", started="t")
    r.nodes["ctl"] = NodeResult("ctl", "10.0.0.10", ops=[
        OpResult("slurm | slurm.conf", "changed", disruption="restart slurmctld",
                 diff="--- /etc/slurm/slurm.conf (node)\n+++ /etc/slurm/slurm.conf (spec)\n-a\n+b\n"),
        OpResult("nvidia driver | NVIDIA driver 1.1", "changed", disruption="reboot + drain", diff="drv: 1.0-1 -> 1.1\n"),
        OpResult("base | chrony", "changed", disruption="none", commands=["apt-get install chrony"]),
        OpResult("grafana | Grafana", "unchanged", reason="skipped: virtual cluster: Grafana comes from ..."),
        OpResult("base | hosts", "unchanged")])
    r.nodes["gpu01"] = NodeResult("gpu01", "10.0.0.11", ops=[OpResult("base | hosts", "unchanged")])
    r.nodes["gpu02"] = NodeResult("gpu02", "10.0.0.12", error="unreachable: timed out")
    return r


def test_plan_shows_each_change_and_ends_with_the_total_by_disruption(capsys):
    show_plan(_result())
    assert capsys.readouterr().out.splitlines() == [
        "ctl: 3 change(s)", "  ~ slurm | slurm.conf  [restart slurmctld]",
        "  ~ nvidia driver | NVIDIA driver 1.1  [reboot + drain]", "      drv: 1.0-1 -> 1.1", "  ~ base | chrony  [none]",
        "gpu01: no change (1 ops converged)", "gpu02: unreachable: timed out",
        "plan: 3 change(s) on 1 of 3 node(s) (restart slurmctld 1, reboot + drain 1, none 1); 1 node(s) failed or "
        "unreachable  (files' diffs, commands, skipped components: -v)"]


def test_plan_verbose_adds_the_diffs_commands_and_skipped_components(capsys):
    show_plan(_result(), verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert "  - grafana | Grafana: skipped: virtual cluster: Grafana comes from ..." in out
    assert ["      -a", "      +b"] == out[out.index("  ~ slurm | slurm.conf  [restart slurmctld]") + 1:][2:4]
    assert "      $ apt-get install chrony" in out and out[-1].startswith("plan: 3 change(s)")
    assert plan_total(RunResult(run_id="x", command="apply", mode="apply", spec_hash="h", started="t")) == \
        "apply: 0 change(s) on 0 of 0 node(s)"


def test_a_no_op_apply_on_a_pipe_prints_its_start_and_end_only():
    out = io.StringIO()
    rep = make_reporter(out)
    for e in [Event(None, None, "start", total=3), Event("gpu01", "x", "unchanged", "converged"),
              Event("gpu01", "y", "skipped", "its condition is false"), Event("gpu01", "z", "changed"),
              Event(None, None, "end")]:
        rep(e)
    assert out.getvalue().splitlines() == ["apply: 3 step(s)", "node gpu01: op 'z' changed", "apply: done"]


def test_history_timing_shows_the_latest_run_that_changed_anything():
    runs = [{"run_id": "b", "changed": 0}, {"run_id": "a", "changed": 41}]
    assert latest_work(runs)["run_id"] == "a"
    assert latest_work([{"run_id": "b", "changed": 0}])["run_id"] == "b" and latest_work([]) is None
