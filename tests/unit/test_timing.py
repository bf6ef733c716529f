"""engine/timing.py on journaled runs written by hand: categories from an op's commands, a deploy's
time split by its slowest node, shares that add up to the run, the one line apply prints."""

from __future__ import annotations

from corral.engine.timing import breakdown, category, one_line


def op(name, status, s, *commands):
    return {"name": name, "status": status, "duration_s": s, "commands": list(commands)}


def test_category_from_what_the_op_ran():
    assert category(op("a | pkgs", "changed", 1, "dpkg --configure -a",
                       "apt-get install -y -q slurmd || { apt-get update -q && apt-get install -y slurmd; }")) == "install"
    assert category(op("a | deb", "changed", 1, "dpkg -i /tmp/x.deb")) == "install"
    assert category(op("a | svc", "changed", 1, "systemctl daemon-reload", "systemctl restart slurmd",
                       "for i in $(seq 240); do ...; echo 'slurmd not ready after 60 s; last log lines:'")) == "services"
    assert category(op("a | file", "changed", 1, "upload /etc/slurm/slurm.conf.corral-new",
                       "mv -f /etc/slurm/slurm.conf.corral-new /etc/slurm/slurm.conf")) == "config"
    assert category(op("a | cmd", "changed", 1, "scontrol reconfigure")) == "commands"
    assert category(op("a | same", "unchanged", 1)) == "checks"
    assert category(op("a | skip", "skipped", 0)) == "checks"
    assert category(op("a | boom", "failed", 1, "apt-get install -y x")) == "install"


RUN = {
    "duration_s": 20.0,
    "timing": [{"name": "connect", "kind": "connect", "s": 1.0}, {"name": "facts", "kind": "facts", "s": 2.0},
               {"name": "prepare", "kind": "prepare", "s": 0.5},
               {"name": "munge", "kind": "deploy", "s": 10.0},
               {"name": "slurm", "kind": "deploy", "s": 4.0},
               {"name": "driver rollout", "kind": "rollout", "s": 2.0}],
    "nodes": {
        "ctl": {"ops": [op("munge | packages", "changed", 3.0, "apt-get install -y munge"),
                        op("slurm | slurm.conf", "changed", 1.0, "upload /etc/slurm/slurm.conf")]},
        "gpu01": {"ops": [op("munge | packages", "changed", 8.0, "apt-get install -y munge"),
                          op("munge | munge running", "changed", 1.5, "systemctl restart munge"),
                          op("slurm | slurm.conf", "unchanged", 5.0)]},
    },
}


def test_breakdown_follows_the_slowest_node_of_each_deploy():
    t = breakdown(RUN)
    phases = {p["name"]: p for p in t["phases"]}
    assert phases["munge"]["node"] == "gpu01" and phases["slurm"]["node"] == "gpu01"
    cats = t["categories"]
    # munge: gpu01's 8 s install + 1.5 s start in a 10 s phase (0.5 s engine);
    # slurm: gpu01's 5 s check in a 4 s phase (scaled down to 4 s, no engine)
    assert cats["install"] == 8.0 and cats["services"] == 1.5 and cats["checks"] == 4.0
    assert cats["connect"] == 1.0 and cats["facts"] == 2.0 and cats["rollouts"] == 2.0
    assert abs(sum(cats.values()) - 20.0) < 1e-6
    assert cats["engine"] == 0.5 + (20.0 - 19.5)  # in the deploy phase, and outside every phase
    assert list(cats)[0] == "install"  # largest first
    assert [o["op"] for o in t["slowest_ops"][:2]] == ["munge | packages", "slurm | slurm.conf"]


def test_plan_is_one_phase_over_every_deploy():
    run = {"duration_s": 3.0, "timing": [{"name": "plan", "kind": "deploy", "s": 2.0, "deploys": None}],
           "nodes": {"a": {"ops": [op("munge | x", "changed", 0.5, "touch y"), op("slurm | y", "unchanged", 1.0)]}}}
    t = breakdown(run)
    assert t["phases"][0]["node"] == "a"
    assert t["categories"]["checks"] == 1.0 and t["categories"]["commands"] == 0.5


def test_one_line():
    assert one_line(breakdown(RUN)) == "time: 20.0 s (install 40 %, checks 20 %, facts 10 %, rollouts 10 %, services 8 %)"
    assert one_line(breakdown({"duration_s": 1.25})) == "time: 1.2 s"
    assert one_line(breakdown({"duration_s": 0.0, "timing": [], "nodes": {}})) == "time: 0.0 s"


def test_journal_rows_from_before_timing_still_read():
    """A run journaled before per-op times: no timing, ops without duration_s -> all of it is engine."""
    t = breakdown({"duration_s": 5.0, "nodes": {"a": {"ops": [{"name": "x | y", "status": "changed"}]}}})
    assert t["categories"] == {} and t["slowest_ops"][0]["s"] == 0.0


def test_rollout_steps_are_timed_as_they_end_and_counted_as_rollouts(monkeypatch):
    import corral.engine.results as results
    from corral.engine.results import OpResult, TimedSteps
    from corral.engine.timing import category
    now = {"t": 100.0}
    monkeypatch.setattr(results.time, "monotonic", lambda: now["t"])
    steps = TimedSteps()
    for step, took in (("drain", 1.5), ("reboot", 12.0), ("verify", 0.5)):
        now["t"] += took
        steps.append(OpResult(name=f"driver rollout | {step}", status="changed"))
    assert [(o.name.split(" | ")[1], o.duration_s) for o in steps] == [("drain", 1.5), ("reboot", 12.0), ("verify", 0.5)]
    assert {category(o.to_json()) for o in steps} == {"rollouts"}
    assert category({"name": "remove node", "status": "changed"}) == "rollouts"
    assert category({"name": "driver rollouts file", "status": "changed", "commands": ["echo"]}) == "commands"


def test_overlapping_deploys_split_along_the_node_that_took_longest():
    """An apply's deploys overlap (engine/execute.apply journals `start` and `waited`): the split is
    the critical node's ops and its waits for the others, once, not each deploy's slowest node summed."""
    run = {"duration_s": 12.0,
           "timing": [{"name": "connect", "kind": "connect", "s": 1.0},
                      {"name": "packages", "kind": "deploy", "s": 8.0, "start": 0.0, "waited": {}},
                      {"name": "slurm controller", "kind": "deploy", "s": 2.0, "start": 8.0, "waited": {}},
                      {"name": "slurm compute", "kind": "deploy", "s": 7.5, "start": 3.0,
                       "waited": {"gpu01": 6.0}}],
           "nodes": {"ctl": {"ops": [op("packages | install", "changed", 8.0, "apt-get install -y slurmctld"),
                                     op("slurm controller | running", "changed", 2.0, "systemctl restart slurmctld")]},
                     "gpu01": {"ops": [op("packages | install", "changed", 3.0, "apt-get install -y slurmd"),
                                       op("slurm compute | running", "changed", 1.5, "systemctl restart slurmd")]}}}
    t = breakdown(run)
    cats = t["categories"]
    # the deploys' wall: 0 -> 10.5 s; gpu01: 3 + 1.5 + 6 waited = 10.5 > ctl's 10
    assert cats["install"] == 3.0 and cats["services"] == 1.5 and cats["waits"] == 6.0
    assert abs(sum(cats.values()) - 12.0) < 1e-6 and cats["connect"] == 1.0
    phases = {p["name"]: p for p in t["phases"]}
    assert phases["packages"]["node"] == "ctl" and phases["slurm compute"]["node"] == "gpu01"
