"""`corral up` as a workflow (virtual cluster -> apply -> validate -> next steps), with the virtual
cluster, converge and validate faked; and how the CLI renders its result (text, JSON, exit code)."""

from __future__ import annotations

import json

import pytest

from corral.checks.result import Check, Report
from corral.cli import run_cmd
from corral.cli.main import main
from corral.engine.results import NodeResult, RunResult
from corral.errors import UsageError
from corral.virtual.cluster import NodeStatus
from corral.workflows import up as up_flow


def run_result(ok: bool = True) -> RunResult:
    r = RunResult("r1", "up", "apply", "abc", "2024-01-01T00:00:00Z", duration_s=1.5)
    r.nodes["ctl"] = NodeResult("ctl", "10.213.0.10")
    r.nodes["gpu01"] = NodeResult("gpu01", "10.213.0.11", error=None if ok else "boom")
    return r


def report(ok: bool = True) -> Report:
    return Report(checks=[Check("nodes", "OK", "2/2 available"),
                          Check("gpu-job", "OK" if ok else "FAIL", "sees 4 GPUs" if ok else "no GPUs")])


@pytest.fixture
def fakes(monkeypatch):
    calls: dict = {"converge": [], "validate": 0}

    class FakeVC:
        def __init__(self, cluster):
            self.cluster = cluster

        def up(self):
            return [NodeStatus(n.name, n.address, list(n.roles), 0, True, 1, True)
                    for n in self.cluster.nodes]

    def converge(cluster, mode, **kw):
        calls["converge"].append((mode, kw))
        return calls.get("apply") or run_result()

    def validate(cluster):
        calls["validate"] += 1
        return report()

    monkeypatch.setattr(up_flow, "VirtualCluster", FakeVC)
    monkeypatch.setattr(up_flow, "converge", converge)
    monkeypatch.setattr(up_flow, "validate", validate)
    return calls


def test_up_writes_the_default_spec_applies_and_validates(tmp_path, fakes):
    said: list[str] = []
    result = up_flow.up(tmp_path / "vc", say=said.append)
    spec = tmp_path / "vc" / "cluster.yaml"
    assert spec.exists() and result.spec == spec
    assert said == [f"wrote {spec}", "virtual cluster up: 4 nodes; applying"]
    assert [(mode, kw["command"], kw["limit"]) for mode, kw in fakes["converge"]] == [("apply", "up", None)]
    assert fakes["validate"] == 1 and result.ok and result.try_node == "gpu01"
    assert result.to_json()["validate"]["ok"] is True
    # the example user: her own key pair on this host, its public half in the spec, the login shown
    key = tmp_path / "vc" / ".corral" / "ssh" / "users" / "alice_ed25519"
    assert key.stat().st_mode & 0o077 == 0 and key.with_suffix(".pub").read_text().strip() in spec.read_text()
    assert result.login == ("login1", "alice")
    assert ("corral virtual ssh login1 --user alice", "log in as alice (home on shared /home)") in result.next_steps()
    said.clear()
    up_flow.up(tmp_path / "vc", say=said.append)  # the spec is there now: not rewritten
    assert said == ["virtual cluster up: 4 nodes; applying"]
    from corral.spec.loader import load
    assert {g.os for g in load(spec).spec.nodes} == {"debian-13"}  # a new cluster: Debian 13, Slurm 24.11
    assert spec.read_text().count("    os: debian-13\n") == 3  # and its file says so


def test_up_with_os_debian_12_writes_it(tmp_path, fakes):
    from corral.spec.loader import load
    result = up_flow.up(tmp_path / "vc", os_name="debian-12")
    assert {g.os for g in load(result.spec).spec.nodes} == {"debian-12"}
    assert result.spec.read_text().count("    os: debian-12\n") == 3


def test_up_does_not_validate_after_a_failed_apply(tmp_path, fakes):
    fakes["apply"] = run_result(ok=False)
    result = up_flow.up(tmp_path)
    assert fakes["validate"] == 0 and not result.ok and result.validate is None
    assert result.next_steps() == [] and result.checks == []
    assert result.to_json() == {"ok": False, "spec": str(tmp_path / "cluster.yaml"),
                                "apply": fakes["apply"].to_json(), "validate": None}


def test_show_up_prints_the_checks_and_next_steps(tmp_path, capsys):
    result = up_flow.UpResult(spec=tmp_path / "cluster.yaml", nodes=[], apply=run_result(), validate=report())
    run_cmd.show_up(result)
    text = capsys.readouterr().out
    assert "OK      gpu-job: sees 4 GPUs" in text
    run_id = result.apply.run_id
    assert f"time: {result.apply.duration_s:.1f} s  (corral history --run {run_id} --timing)\n" in text  # no phases: no split
    assert text.endswith(f"\ncluster ready. Next:\n  export CORRAL_SPEC={tmp_path / 'cluster.yaml'}\n"
                         "  corral plan            # 0 changes on a converged cluster\n"
                         "  corral virtual ssh gpu01 nvidia-smi\n  corral virtual down\n")
    with_login = up_flow.UpResult(spec=tmp_path / "cluster.yaml", nodes=[], apply=run_result(), validate=report(),
                                  login=("login1", "alice"))
    run_cmd.show_up(with_login)
    text = capsys.readouterr().out  # a command longer than the column keeps two spaces before its comment
    assert "  corral virtual ssh login1 --user alice  # log in as alice (home on shared /home)\n" in text
    failed = up_flow.UpResult(spec=tmp_path / "c.yaml", nodes=[], apply=run_result(),
                              validate=report(ok=False))
    run_cmd.show_up(failed)
    text = capsys.readouterr().out
    assert "FAIL    gpu-job: no GPUs" in text and "cluster ready" not in text


@pytest.mark.parametrize("ok", [True, False])
def test_cli_up_json_and_exit_code(tmp_path, monkeypatch, capsys, ok):
    result = up_flow.UpResult(spec=tmp_path / "cluster.yaml", nodes=[], apply=run_result(),
                              validate=report(ok=ok))
    seen: dict = {}

    def fake_up(directory, **kw):
        seen.update(kw)
        return result

    monkeypatch.setattr(up_flow, "up", fake_up)
    assert main(["up", "--json"]) == (0 if ok else 1)
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["ok", "spec", "apply", "validate"] and data["ok"] is ok
    assert data["validate"]["checks"][1]["status"] == ("OK" if ok else "FAIL")
    assert seen["apply_say"] is None and seen["on_event"] is None  # --json: the apply runs quietly


def test_up_on_debian_13_writes_its_release_and_refuses_a_spec_of_another(tmp_path, fakes, monkeypatch, capsys):
    from corral.spec.loader import load
    result = up_flow.up(tmp_path / "vc", os_name="debian-13")
    spec = load(result.spec).spec
    assert result.ok and {g.os for g in spec.nodes} == {"debian-13"}
    text = result.spec.read_text()
    with pytest.raises(UsageError, match="exists and its nodes do not all run debian-12"):
        up_flow.up(tmp_path / "vc", os_name="debian-12")
    assert result.spec.read_text() == text  # nothing rewritten
    seen: dict = {}
    monkeypatch.setattr(up_flow, "up", lambda directory, **kw: seen.update(kw) or result)
    assert main(["up", "--json", "--os", "debian-13"]) == 0 and seen["os_name"] == "debian-13"
    capsys.readouterr()
    assert main(["up", "--os", "ubuntu-99"]) == 2  # a release corral has no row for: usage error, nothing run
    assert "'ubuntu-99': one of debian-12, debian-13" in capsys.readouterr().err
