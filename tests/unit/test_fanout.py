"""The fan-out through Slurm, its pure parts: the result lines (chunks from many nodes interleaved),
the snapshot (made on the control host, loaded on a node), the controller's script, the runtime
tarball, merging the controller's output into a RunResult, and a local run of the deploys."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from corral import __version__
from corral.engine import run
from corral.engine.results import NodeResult, RunResult
from corral.errors import CorralError, UsageError
from corral.fanout import node as fnode
from corral.fanout import runtime, slurm, snapshot
from corral.fanout.driver import _merge, targets
from corral.spec.loader import load_text

SPEC = """\
name: demo
state_dir: /root/.corral-demo
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 4}}
"""


def cluster(tmp_path, text=SPEC):
    (tmp_path / "cluster.yaml").write_text(text)
    return load_text(text, str(tmp_path / "cluster.yaml"))


def test_result_lines_survive_interleaving_and_a_lost_chunk():
    def big(node):  # random text: does not compress into one chunk
        return {"node": node, "ok": True, "ops": [{"name": f"op{i}", "status": "unchanged",
                                                   "reason": os.urandom(150).hex()} for i in range(30)]}
    a, b, c = [], [], []
    fnode.emit("gpu01", big("gpu01"), a.append)
    fnode.emit("gpu02", {"node": "gpu02", "ok": False, "error": "boom"}, b.append)
    fnode.emit("gpu03", big("gpu03"), c.append)
    assert len(a) > 2 and len(c) > 2 and all(len(line.encode()) < 1024 - 64 for line in a)  # srun keeps it whole
    del c[1]  # one of gpu03's chunks lost
    mixed = [x for pair in zip(a, b + [""] * len(a)) for x in pair] + ["srun: warning: something", *c]
    found, other = fnode.collect(mixed)
    assert found["gpu01"]["ops"][29]["reason"] == json.loads(json.dumps(found["gpu01"]))["ops"][29]["reason"]
    assert len(found["gpu01"]["ops"]) == 30 and found["gpu02"]["error"] == "boom"
    assert "gpu03" not in found
    assert other == ["srun: warning: something"]
    # a chunk that claims to be another node's result is not taken
    forged = []
    fnode.emit("gpu09", {"node": "gpu01", "ok": True}, forged.append)
    assert "gpu09" not in fnode.collect(forged)[0]


def test_snapshot_round_trip_rebuilds_the_cluster_without_control_host_files(tmp_path):
    text = SPEC + ("identity:\n  ldap:\n    uri: [ldaps://ldap.example.com]\n    base: dc=example,dc=com\n"
                   "    ca_cert: ca.pem\n")
    (tmp_path / "ca.pem").write_bytes((Path(__file__).resolve().parents[1] / "fixtures" / "ldap" / "ca.pem").read_bytes())
    c = cluster(tmp_path, text)
    snap = snapshot.make(c, run_id="abc123", mode="apply", deploys=["jobhooks", "health"], runtime="r1")
    assert snap["deploys"] == ["health", "jobhooks"]  # the components' order
    (tmp_path / "ca.pem").unlink()  # as on a node: the file is not there
    rebuilt, data = snapshot.load(json.dumps(snap), base=tmp_path / "node")
    assert [n.name for n in rebuilt.nodes] == ["ctl", "gpu01", "gpu02"]
    assert rebuilt.node("gpu02").gpu_count == 4 and rebuilt.node("gpu02").address == "10.0.0.12"
    assert rebuilt.state_dir == tmp_path / "node" / "state"  # never the control host's /root/.corral-demo
    assert data["run_id"] == "abc123"


@pytest.mark.parametrize("change, said", [
    (lambda s: s.update(corral="0.0.1"), "another corral version"),
    (lambda s: s.update(format=9), "format"),
    (lambda s: s.update(spec_hash="0" * 16), "reads differently"),
    (lambda s: s["spec"].update(name="bad name!"), "does not validate"),
    (lambda s: s.update(deploys=["munge"]), "cannot run node-locally"),
    (lambda s: s.update(mode="destroy"), "neither plan nor apply"),
])
def test_snapshot_refused_with_the_reason(tmp_path, change, said):
    snap = snapshot.make(cluster(tmp_path), run_id="r", mode="apply", deploys=["health"], runtime="r1")
    change(snap)
    with pytest.raises(CorralError, match=said):
        snapshot.load(json.dumps(snap), base=tmp_path / "node")
    with pytest.raises(CorralError, match="not JSON"):
        snapshot.load("{", base=tmp_path)


def test_unknown_deploy_and_no_compute_node_are_usage_errors(tmp_path):
    c = cluster(tmp_path)
    with pytest.raises(UsageError, match="'munge' cannot run node-locally"):
        snapshot.check_deploys(["health", "munge"])
    with pytest.raises(UsageError, match="no deploy named 'helth'.*did you mean 'health'"):
        snapshot.check_deploys(["helth"])
    with pytest.raises(UsageError, match="no compute node"):
        targets(c, ["ctl"])
    assert targets(c, None) == ["gpu01", "gpu02"]


def test_controller_script_is_bounded_quoted_and_valid_bash():
    text = slurm.script("gpu[01-02]", 2, "94ca655fb62d965f", "3.11", "abc123", 300)
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    assert "-w 'gpu[01-02]' -N 2" in text and "--overlap --chdir=/ -Q -N 2 --ntasks-per-node=1" in text
    assert "trap '[ -z \"$job\" ] || { scancel --quiet \"$job\"; for i in" in text  # the allocation never outlives the script
    for line in text.splitlines():  # every Slurm command runs under timeout
        words = line.split()
        for tool in ("sbatch", "srun", "sbcast"):
            if tool in words:
                assert "timeout" in words[:words.index(tool)] or "$(timeout" in line, line
    task = slurm.task("94ca655fb62d965f", "3.11", "/var/lib/corral/fanout/abc123.json", 300)
    subprocess.run(["bash", "-n"], input=task, text=True, check=True)
    assert "timeout -k 5 300 python3 -P -m corral node converge" in task


def test_runtime_holds_corral_and_its_dependencies_and_is_deterministic(tmp_path, monkeypatch):
    names = runtime.files()
    assert "corral/fanout/node.py" in names and "corral/node/health.py" in names
    assert any(n.startswith("pyinfra/") for n in names) and any(n.startswith("pydantic_core/") for n in names)
    assert any(n.endswith("entry_points.txt") and n.startswith("pyinfra-") for n in names)  # its connectors
    assert not any("__pycache__" in n or n.startswith("_pytest/") or n.startswith("hypothesis/") for n in names)
    first, again = runtime.build(tmp_path / "a"), runtime.build(tmp_path / "b")
    assert first.id == again.id and first.path.read_bytes() == again.path.read_bytes()
    assert first.python == runtime.python_tag()
    index = tmp_path / "a" / "runtime" / runtime.index_name(runtime.python_tag())
    packed = []
    monkeypatch.setattr(runtime, "_pack", lambda *a: packed.append(a) or first)
    assert runtime.build(tmp_path / "a").id == first.id and packed == []  # nothing changed: not packed again
    index.write_text(index.read_text().replace('"fingerprint": "', '"fingerprint": "x'))
    runtime.build(tmp_path / "a")
    assert len(packed) == 1  # a file changed (here: the fingerprint no longer matches): packed again


def test_merge_names_every_node_with_what_happened():
    r = RunResult(run_id="x", command="fanout (slurm)", mode="apply", spec_hash="h", started="t")
    r.nodes = {n: NodeResult(node=n, address="a") for n in ("gpu01", "gpu02", "gpu03")}
    r.timing = [{"name": "srun", "kind": "deploy", "s": 3.0}]
    lines: list[str] = []
    fnode.emit("gpu01", {"node": "gpu01", "ok": True, "error": None, "duration_s": 2.5, "cpu_s": 1.1,
                         "ops": [{"name": "health | /x", "status": "changed", "commands": ["upload"]}]}, lines.append)
    lines.append(f"{slurm.FAIL} gpu02 python3 is 3.9 here, the corral runtime was built for 3.11")
    _merge(r, lines, 1)
    assert r.nodes["gpu01"].ok and r.nodes["gpu01"].ops[0].status == "changed"
    assert "python3 is 3.9" in r.nodes["gpu02"].error
    assert "no result" in r.nodes["gpu03"].error and not r.ok
    assert r.timing[0]["nodes"]["gpu01"] == {"s": 2.5, "cpu_s": 1.1}
    r2 = RunResult(run_id="y", command="fanout (slurm)", mode="apply", spec_hash="h", started="t")
    r2.nodes = {"gpu01": NodeResult(node="gpu01", address="a")}
    _merge(r2, [f"{slurm.FAIL} - no allocation of the nodes: salloc: Requested nodes are busy"], 3)
    assert "Requested nodes are busy" in r2.nodes["gpu01"].error


def test_local_run_plans_the_deploys_on_this_machine_as_the_named_node(tmp_path):
    from corral.deploy.context import gather
    from corral.fanout.snapshot import node_local
    health = node_local()["health"]
    c = cluster(tmp_path, SPEC.replace("/root/.corral-demo", str(tmp_path / "state")))
    result = run(c, [health], mode="plan", limit=["gpu02"], local=True, record=False, prepare=gather(c))
    assert list(result.nodes) == ["gpu02"] and result.nodes["gpu02"].ok, result.nodes["gpu02"].error
    names = [o.name for o in result.nodes["gpu02"].ops]
    assert "health | /usr/local/lib/corral/health.py" in names
    with pytest.raises(UsageError, match="exactly one node"):
        run(c, [health], mode="plan", limit=["gpu01", "gpu02"], local=True, record=False)


def test_node_main_reports_a_bad_snapshot_as_its_result(tmp_path, capsys):
    (tmp_path / "s.json").write_text(json.dumps({"format": 1, "corral": __version__}))
    assert fnode.main(str(tmp_path / "s.json"), "gpu01") == 1
    found, _ = fnode.collect(capsys.readouterr().out.splitlines())
    assert found["gpu01"]["error_kind"] == "node-converge" and "spec" in found["gpu01"]["error"]
    assert fnode.main(str(tmp_path / "missing.json"), "gpu01") == 1
    found, _ = fnode.collect(capsys.readouterr().out.splitlines())
    assert "cannot read the snapshot" in found["gpu01"]["error"]


FAKE = {  # Slurm's commands as this test's stand-ins: one allocation (job 42) of FAKE_NODES, run here
    "sinfo": "echo gpu",
    "sbatch": "echo \"$*\" > \"$FAKE_STATE/sbatch-args\"; echo 42",
    "squeue": 'if [ -f "$FAKE_STATE/cancelled" ]; then exit 0; fi; case "$*" in *%T*) echo RUNNING;; *) echo None;; esac',
    "scancel": 'echo "$*" > "$FAKE_STATE/cancelled"',
    "sbcast": 'src=$3; dst=$4; [ "$src" -ef "$dst" ] || cp "$src" "$dst"',
    "srun": 'a=("$@"); k=${#a[@]}; for n in $FAKE_NODES; do SLURMD_NODENAME=$n "${a[k-3]}" -c "${a[k-1]}"; done',
}


def test_the_controller_script_end_to_end_with_slurm_stand_ins(tmp_path, monkeypatch):
    """The real script, task and `corral node converge` (plan, against this machine), with Slurm's
    commands replaced by stand-ins that run each step here: the runtime is unpacked and run, the result
    comes back in lines, the allocation is cancelled and every file the run made is gone."""
    bindir, state = tmp_path / "bin", tmp_path / "state"
    bindir.mkdir(), state.mkdir()
    for name, body in FAKE.items():
        (bindir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bindir / name).chmod(0o755)
    monkeypatch.setattr(slurm, "DIR", str(tmp_path / "fanout"))
    monkeypatch.setattr(slurm, "RUNTIMES", str(tmp_path / "runtime"))
    c = cluster(tmp_path, SPEC.replace("/root/.corral-demo", str(tmp_path / "ctl-state")))
    rt = runtime.build(c.state_dir)
    (tmp_path / "fanout").mkdir()
    (tmp_path / "fanout" / f"corral-runtime-{rt.id}.tar.gz").write_bytes(rt.path.read_bytes())
    snap = snapshot.make(c, run_id="feed01", mode="plan", deploys=["health"], runtime=rt.id)
    (tmp_path / "fanout" / "feed01.json").write_text(json.dumps(snap))
    text = slurm.script("gpu02", 1, rt.id, rt.python, "feed01", 120)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_STATE": str(state), "FAKE_NODES": "gpu02",
           "CORRAL_NODE_DIR": str(tmp_path / "node")}
    proc = subprocess.run(["bash", "-c", text], capture_output=True, text=True, env=env, timeout=120)
    found, other = fnode.collect(proc.stdout.splitlines())
    assert proc.returncode == 0 and "gpu02" in found, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert found["gpu02"]["ok"] and "health | /usr/local/lib/corral/health.py" in [o["name"] for o in found["gpu02"]["ops"]]
    assert (state / "cancelled").read_text().strip() == "--quiet 42"
    assert "-w gpu02 -N 1" in (state / "sbatch-args").read_text()
    assert sorted(p.name for p in (tmp_path / "fanout").iterdir()) == []  # snapshot and tarball removed
    assert (tmp_path / "runtime" / rt.id / "RUNTIME.json").is_file()
    # a node whose python3 is another minor version says so and runs nothing
    (bindir / "python3").write_text("#!/bin/sh\necho 3.9\n")
    (bindir / "python3").chmod(0o755)
    (state / "cancelled").unlink()
    (tmp_path / "fanout" / "feed01.json").write_text(json.dumps(snap))
    proc = subprocess.run(["bash", "-c", text], capture_output=True, text=True, env=env, timeout=120)
    r = RunResult(run_id="feed01", command="fanout (slurm)", mode="plan", spec_hash="h", started="t")
    r.nodes = {"gpu02": NodeResult(node="gpu02", address="a")}
    _merge(r, proc.stdout.splitlines(), proc.returncode)
    assert "python3 is 3.9 here, the corral runtime was built for" in r.nodes["gpu02"].error


def test_a_controller_that_cannot_be_reached_fails_every_node_with_the_reason(tmp_path, monkeypatch):
    from corral.engine import journal
    from corral.errors import NodeError
    from corral.fanout import driver
    c = cluster(tmp_path, SPEC.replace("/root/.corral-demo", str(tmp_path / "state")))
    monkeypatch.setattr(driver.runtime, "build", lambda d, python: runtime.Runtime("abc", tmp_path / "rt.tgz", 1, python))

    def refuse(cluster, node, command, **kw):
        raise NodeError("ssh: connect to host 10.0.0.10 port 22: Connection refused", node=node)
    monkeypatch.setattr(driver.remote, "run_on", refuse)
    r = driver.fan_out(c, ["health"])
    assert not r.ok and sorted(r.nodes) == ["gpu01", "gpu02"]
    assert all("not converged" in n.error and "Connection refused" in n.error for n in r.nodes.values())
    assert journal.recent(c.state_dir, limit=1)[0]["command"] == "fanout (slurm)"
