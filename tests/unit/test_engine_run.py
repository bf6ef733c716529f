"""The engine end to end against a private sshd on loopback (no mocks of pyinfra).

Nodes ctl1 (127.0.0.2) and cn1 (127.0.0.3) are this machine through the private sshd; down1
(127.0.0.4) has nothing listening. The deploy only touches files under a tmp dir.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from io import StringIO
from pathlib import Path

import pytest
from pyinfra import host
from pyinfra.api import MaskString, StringCommand, deploy, operation
from pyinfra.api.command import QuoteString
from pyinfra.facts.files import File
from pyinfra.operations import files, server

sys.path.insert(0, str(Path(__file__).parent))
from conftest_engine import ADDRESSES, DOWN, engine_cluster, make_cluster, sshd  # noqa: E402,F401

from corral.engine import hostkeys, journal  # noqa: E402
from corral.engine.progress import PlainReporter  # noqa: E402
from corral.engine.runner import run  # noqa: E402

SECRET = "hunter2-Zq9xV7pL"
UP = ["ctl1", "cn1"]


@operation()
def secret_file(path: str, secret: str):
    """Write a secret once (a MaskString in the command), say why not when it exists."""
    if host.get_fact(File, path=path):
        host.noop(f"secret file {path} exists")
        return
    yield StringCommand("printf", "%s", MaskString(secret), ">", QuoteString(path))


@operation()
def explode(node: str, on: str | None):
    if node == on:
        raise ValueError(f"cannot plan {node}")
    yield from ()


def make_deploy(root: Path, *, fail_on: str | None = None, raise_on: str | None = None,
                prepare_error_on: str | None = None):
    @deploy("enginetest")
    def enginetest():
        node = host.data.corral_node
        if node.name == prepare_error_on:
            raise KeyError("no such data")
        base = str(root / node.name)
        files.directory(name="state dir", path=base)
        put = files.put(name="node file", src=StringIO(f"node {node.name} index {host.data.corral_index}\n"),
                        dest=f"{base}/node.txt")
        secret_file(name="secret", path=f"{base}/secret", secret=SECRET)
        server.shell(name="after change", commands=[f"touch {base}/changed"], _if=put.did_change)
        explode(name="explode", node=node.name, on=raise_on)
        if fail_on:
            server.shell(name="maybe fail", commands=[
                f"if [ {node.name} = {fail_on} ]; then echo line1 >&2; echo boom-{node.name} >&2; exit 3; fi"])
    return enginetest


def _ops(result, node):
    return {o.name: o for o in result.nodes[node].ops}


def test_plan_apply_converge(engine_cluster, tmp_path):
    root = tmp_path / "work"
    d = make_deploy(root)
    lines = StringIO()
    plan = run(engine_cluster, [d], mode="plan", on_event=PlainReporter(lines))
    assert not (root / "ctl1").exists(), "plan must not change a node"
    for name in UP:
        ops = _ops(plan, name)
        assert [o.status for o in ops.values()] == ["changed"] * 4 + ["unchanged"], ops
        assert any("mkdir" in c for c in ops["enginetest | state dir"].commands)
    assert "would change" in lines.getvalue()
    # the unreachable node fails alone
    down = plan.nodes["down1"]
    assert not down.reachable and down.error_kind == "refused" and DOWN in down.error
    assert not plan.ok and plan.failed_nodes == ["down1"]

    first = run(engine_cluster, [d], mode="apply")
    for name in UP:
        assert first.nodes[name].ok and first.totals[name]["changed"] == 4
        assert (root / name / "secret").read_text() == SECRET
        assert (root / name / "node.txt").read_text().startswith(f"node {name} index")
    assert first.nodes["down1"].error_kind == "refused"

    second = run(engine_cluster, [d], mode="apply", limit=UP)
    assert second.ok and set(second.nodes) == set(UP)
    for name in UP:
        assert second.totals[name] == {"changed": 0, "unchanged": 5, "failed": 0, "skipped": 0}
        reasons = {o.name: o.reason for o in second.nodes[name].ops}
        assert "already exists" in reasons["enginetest | state dir"]
        assert "already uploaded" in reasons["enginetest | node file"]
        assert reasons["enginetest | secret"] == f"secret file {root / name / 'secret'} exists"
        assert "condition (_if) is false" in reasons["enginetest | after change"]
    replan = run(engine_cluster, [d], mode="plan", limit=UP)
    assert replan.ok and all(t["changed"] == 0 for t in replan.totals.values())

    # journal: rows written, secret nowhere
    rows = journal.recent(engine_cluster.state_dir, limit=10, with_nodes=True)
    assert [r["run_id"] for r in rows][:4] == [replan.run_id, second.run_id, first.run_id, plan.run_id]
    assert rows[2]["mode"] == "apply" and rows[2]["spec_hash"] == engine_cluster.spec_hash()
    assert rows[2]["failed_nodes"] == ["down1"] and rows[1]["ok"]
    db = journal.journal_path(engine_cluster.state_dir)
    assert db.stat().st_mode & 0o777 == 0o600
    assert engine_cluster.state_dir.stat().st_mode & 0o777 == 0o700
    dump = "\n".join(sqlite3.connect(db).iterdump())
    assert SECRET not in dump
    for res in (plan, first, second):
        text = json.dumps(res.to_json())
        assert SECRET not in text
    assert any("*MASKED*" in c for o in plan.nodes["ctl1"].ops for c in o.commands)


def test_op_failure_is_per_node(engine_cluster, tmp_path):
    root = tmp_path / "work"
    result = run(engine_cluster, [make_deploy(root, fail_on="ctl1")], mode="apply", limit=UP)
    ctl, cn = result.nodes["ctl1"], result.nodes["cn1"]
    assert not ctl.ok and ctl.error_kind == "op-failed" and "maybe fail" in ctl.error
    failed = _ops(result, "ctl1")["enginetest | maybe fail"]
    assert failed.status == "failed" and failed.rc == 3
    assert failed.reason == "command exited with status 3: boom-ctl1"
    assert failed.stderr_tail.splitlines()[-1] == "boom-ctl1" and failed.commands
    assert cn.ok and _ops(result, "cn1")["enginetest | maybe fail"].status == "changed"
    assert result.failed_nodes == ["ctl1"]


def test_unknown_host_key_is_refused(tmp_path, sshd):
    cluster = make_cluster(tmp_path, sshd, trust=False)
    result = run(cluster, [make_deploy(tmp_path / "work")], mode="apply", limit=UP)
    for name, address in zip(UP, ADDRESSES):
        node = result.nodes[name]
        assert not node.reachable and node.error_kind == "hostkey-unknown", node.error
        assert f"[{address}]:{sshd.port}" in node.error and name in node.error
        assert f"run `corral trust {name}` after checking the fingerprint" in node.error
    assert not (tmp_path / "work").exists()
    kh = hostkeys.known_hosts_path(cluster.state_dir)
    assert hostkeys.read(kh) == []  # nothing was accepted
    # trusting in the same process takes effect (pyinfra memoizes known_hosts per file name)
    hostkeys.add(kh, ADDRESSES[0], sshd.port, hostkeys.scan(ADDRESSES[0], sshd.port))
    again = run(cluster, [make_deploy(tmp_path / "work")], mode="plan", limit=UP)
    assert again.nodes["ctl1"].ok and again.nodes["cn1"].error_kind == "hostkey-unknown"


def test_changed_host_key_is_refused(tmp_path, sshd):
    cluster = make_cluster(tmp_path, sshd)
    other = tmp_path / "other"
    import subprocess
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = hostkeys.known_hosts_path(cluster.state_dir)
    hostkeys.add(kh, ADDRESSES[0], sshd.port, (tmp_path / "other.pub").read_text(), replace=True)
    result = run(cluster, [make_deploy(tmp_path / "work")], mode="plan", limit=UP)
    ctl = result.nodes["ctl1"]
    assert ctl.error_kind == "hostkey-changed", ctl.error
    assert "host key changed" in ctl.error and "possible MITM or reinstalled node" in ctl.error
    assert "`corral trust --replace ctl1`" in ctl.error and ADDRESSES[0] in ctl.error
    assert result.nodes["cn1"].ok and result.totals["cn1"]["changed"] == 4


def test_wrong_key_is_auth_error(tmp_path, sshd):
    import subprocess
    cluster = make_cluster(tmp_path, sshd)
    wrong = tmp_path / "wrong"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    sshd_key = Path(sshd.client_key)
    spec = cluster.path.read_text().replace(str(sshd_key), str(wrong))
    from corral.spec.loader import load_text
    cluster = load_text(spec, str(cluster.path))
    result = run(cluster, [make_deploy(tmp_path / "work")], mode="plan", limit=["ctl1"])
    assert result.nodes["ctl1"].error_kind == "auth", result.nodes["ctl1"].error


def test_jump_host(tmp_path, sshd):
    cluster = make_cluster(tmp_path, sshd)
    port_line = f"  port: {sshd.port}\n"
    spec = cluster.path.read_text().replace(
        port_line, f"{port_line}  jump_host: root@{ADDRESSES[0]}:{sshd.port}\n")
    from corral.spec.loader import load_text
    cluster = load_text(spec, str(cluster.path))
    result = run(cluster, [make_deploy(tmp_path / "work")], mode="apply", limit=["cn1"])
    assert result.ok, result.nodes["cn1"].error
    assert (tmp_path / "work" / "cn1" / "secret").exists()


def test_unknown_limit_is_usage_error(engine_cluster):
    from corral.errors import UsageError
    with pytest.raises(UsageError, match="unknown node 'nope'"):
        run(engine_cluster, [], mode="plan", limit=["nope"])
    with pytest.raises(UsageError):
        run(engine_cluster, [], mode="yolo")


@pytest.mark.parametrize("mode", ["plan", "apply"])
def test_op_exception_fails_one_node(engine_cluster, tmp_path, mode, capfd):
    d = make_deploy(tmp_path / "work", raise_on="cn1")
    result = run(engine_cluster, [d], mode=mode, limit=UP)
    cn = result.nodes["cn1"]
    assert cn.error_kind == "op-failed" and "ValueError: cannot plan cn1" in cn.error
    assert _ops(result, "cn1")["enginetest | explode"].status == "failed"
    assert result.nodes["ctl1"].ok
    out, err = capfd.readouterr()
    assert out == "" and err == "", "the engine must not print"


def test_deploy_error_at_prepare_fails_one_node(engine_cluster, tmp_path):
    result = run(engine_cluster, [make_deploy(tmp_path / "work", prepare_error_on="ctl1")],
                 mode="apply", limit=UP)
    ctl = result.nodes["ctl1"]
    assert ctl.error_kind == "deploy-error" and "KeyError" in ctl.error and ctl.ops == []
    assert result.nodes["cn1"].ok and (tmp_path / "work" / "cn1" / "changed").exists()


def test_only_unreachable_nodes_and_unwritable_journal(engine_cluster, tmp_path):
    journal.journal_path(engine_cluster.state_dir).mkdir(parents=True)  # cannot be a database
    result = run(engine_cluster, [make_deploy(tmp_path / "work")], mode="apply", limit=["down1"])
    assert result.failed_nodes == ["down1"] and result.nodes["down1"].error_kind == "refused"
    assert any(w.startswith("journal not written") for w in result.warnings)


def test_role_conditional_ops_keep_their_own_names(engine_cluster, tmp_path):
    """pyinfra (API mode) identifies ops by position, so ctl1's 2nd op and cn1's 1st share meta."""
    root = tmp_path / "work"

    @deploy("roles")
    def roles():
        node = host.data.corral_node
        if node.has("controller"):
            files.directory(name="controller dir", path=str(root / "ctl"))
        files.directory(name="common dir", path=str(root / node.name))

    result = run(engine_cluster, [roles], mode="plan", limit=UP)
    assert [o.name for o in result.nodes["ctl1"].ops] == ["roles | controller dir", "roles | common dir"]
    assert [o.name for o in result.nodes["cn1"].ops] == ["roles | common dir"]


def test_timing_journaled_per_op_and_per_deploy(engine_cluster, tmp_path):
    """Each op's own time and each deploy's wall time are measured, journaled, and add up to the run."""
    from corral.engine.timing import breakdown, one_line

    @deploy("slowtest")
    def slow():
        node = host.data.corral_node
        pause = "0.6" if node.name == "cn1" else "0.1"
        server.shell(name="pause", commands=[f"sleep {pause}"])

    @deploy("quicktest")
    def quick():
        server.shell(name="touch", commands=[f"touch {tmp_path}/t-{host.data.corral_node.name}"])

    result = run(engine_cluster, [slow, quick], mode="apply", limit=UP)
    assert result.ok
    assert [(p["name"], p["kind"]) for p in result.timing] == [
        ("connect", "connect"), ("prepare", "prepare"), ("slowtest", "deploy"), ("quicktest", "deploy")]
    pauses = {n: _ops(result, n)["slowtest | pause"].duration_s for n in UP}
    assert pauses["cn1"] >= 0.6 and pauses["ctl1"] >= 0.1, pauses
    phase = {p["name"]: p for p in result.timing}
    assert phase["slowtest"]["s"] >= pauses["cn1"]  # its span: until the slowest node is done
    # not marked with waits_for (the components declarations, components/): a barrier, quicktest starts after slowtest's end
    assert phase["quicktest"]["start"] >= phase["slowtest"]["start"] + phase["slowtest"]["s"] - 0.005
    row = journal.get(engine_cluster.state_dir, result.run_id)
    assert row["timing"] == result.timing and row["duration_s"] == round(result.duration_s, 3)
    time = breakdown(row)
    slow_phase = next(p for p in time["phases"] if p["name"] == "slowtest")
    # unit tests run without gevent's monkey patching, so one node's blocking read can count in the
    # other's op time: the slowest node is whichever measured longest
    slowest = max(pauses, key=lambda n: pauses[n])
    assert slow_phase["node"] == slowest
    assert time["slowest_ops"][0]["node"] == slowest and time["slowest_ops"][0]["op"] == "slowtest | pause"
    assert abs(sum(time["categories"].values()) - time["total_s"]) < 0.01
    assert one_line(time).startswith(f"time: {result.duration_s:.1f} s (")


def test_the_journal_records_each_declared_file_written_or_kept(engine_cluster, tmp_path):
    """Each op's result carries the files it declares it installs (deploy/installs.py), whether it wrote them or found
    them as they should be: path, the sha256 of the content, whether secret (then no digest, and the value nowhere)
    and whether made on the node (then no digest). What `corral render` is checked against on a live cluster."""
    import hashlib

    from corral.deploy.installs import installs

    @installs(lambda path, content, **_: {path: content})
    @operation()
    def declared(path: str, content: str | None, secret: bool = False):
        if host.get_fact(File, path=path):
            host.noop(f"{path} there")
            return
        text = MaskString(content) if secret else (content or "made here")
        yield StringCommand("printf", "%s", text, ">", QuoteString(path))

    @deploy("filestest")
    def write():
        base = tmp_path / host.data.corral_node.name
        files.directory(name="dir", path=str(base))
        declared(name="plain", path=f"{base}/plain.conf", content="a = 1\n")
        declared(name="secret", path=f"{base}/key", content=SECRET, secret=True)
        declared(name="edit", path=f"{base}/edited", content=None)

    def recorded(result) -> dict:
        row = journal.get(engine_cluster.state_dir, result.run_id)
        return {n: {o["name"]: o["files"] for o in row["nodes"][n]["ops"]} for n in UP}

    runs = [run(engine_cluster, [write], mode=mode, limit=UP) for mode in ("plan", "apply", "apply")]
    assert [r.ok for r in runs] == [True] * 3 and runs[2].changed == 0
    base = tmp_path / "cn1"
    want = {"filestest | dir": [],
            "filestest | plain": [{"path": f"{base}/plain.conf", "sha256": hashlib.sha256(b"a = 1\n").hexdigest(),
                                   "secret": False, "from_node": False}],
            "filestest | secret": [{"path": f"{base}/key", "sha256": None, "secret": True, "from_node": False}],
            "filestest | edit": [{"path": f"{base}/edited", "sha256": None, "secret": False, "from_node": True}]}
    for result in runs:  # planned, written, kept: the same record
        assert recorded(result)["cn1"] == want
    dump = "\n".join(sqlite3.connect(journal.journal_path(engine_cluster.state_dir)).iterdump())
    assert SECRET not in dump and hashlib.sha256(SECRET.encode()).hexdigest() not in dump
