"""The CLI's contract: exit codes 0/1/2, --json output, one-line located errors on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from corral.cli.main import main

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOOD = """\
name: demo
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - names: gpu[01-03]
    addresses: 10.0.0.[11-13]
    roles: [compute]
    gpus: {model: h100, count: 8}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cluster.yaml"
    p.write_text(text)
    return p


def test_spec_check_ok_and_json(tmp_path, capsys):
    spec = write(tmp_path, GOOD)
    assert main(["spec", "check", "-f", str(spec)]) == 0
    assert "4 nodes, 24 GPUs" in capsys.readouterr().out
    assert main(["spec", "check", "-f", str(spec), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["nodes"] == 4


def test_spec_show_json_expands_groups(tmp_path, capsys):
    spec = write(tmp_path, GOOD)
    assert main(["spec", "show", "-f", str(spec), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in data["nodes"]] == ["ctl", "gpu01", "gpu02", "gpu03"]
    assert data["nodes"][3]["address"] == "10.0.0.13"
    assert data["nodes"][1]["gpus"]["count"] == 8


def test_spec_error_exit_2_located_one_line(tmp_path, capsys):
    spec = write(tmp_path, GOOD.replace("count: 8", "cuont: 8"))
    assert main(["spec", "check", "-f", str(spec)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert f"{spec}:7:" in lines[0] and "cuont" in lines[0] and "did you mean 'count'" in lines[0]


def test_spec_env_var_and_missing_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CORRAL_SPEC", str(write(tmp_path, GOOD)))
    assert main(["spec", "check"]) == 0
    capsys.readouterr()
    assert main(["spec", "check", "-f", str(tmp_path / "nope.yaml")]) == 2
    assert "spec file not found" in capsys.readouterr().err


def test_usage_error_is_exit_2(capsys):
    assert main(["spec", "check", "--bogus"]) == 2
    assert main(["no-such-command"]) == 2


def test_import_deepops_writes_a_valid_spec_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "imported.yaml"
    src = FIXTURES / "deepops" / "slurm" / "config"
    assert main(["import", "deepops", str(src), "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["not_carried"]
    assert main(["spec", "check", "-f", str(out)]) == 0
    before = out.read_text()
    capsys.readouterr()
    assert main(["import", "deepops", str(src), "-o", str(out)]) == 2
    assert "not overwriting" in capsys.readouterr().err
    assert out.read_text() == before


def test_virtual_on_non_virtual_spec_is_usage_error(tmp_path, capsys):
    write(tmp_path, GOOD)
    assert main(["virtual", "status", "--dir", str(tmp_path)]) == 2
    assert "not a virtual cluster spec" in capsys.readouterr().err


def test_trust_shows_the_fingerprint_asks_and_pins(tmp_path, capsys, monkeypatch):
    from corral.engine import hostkeys
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "A" * 43
    monkeypatch.setattr(hostkeys, "scan", lambda address, port: key)
    spec = write(tmp_path, GOOD)
    monkeypatch.setattr("typer.confirm", lambda *a, **kw: False)
    assert main(["trust", "gpu01", "-f", str(spec)]) == 1  # declined: nothing pinned
    assert capsys.readouterr().out == f"gpu01 (10.0.0.11): {hostkeys.fingerprint(key)}\n"
    assert main(["trust", "gpu[01-02]", "-f", str(spec), "--yes"]) == 0
    assert capsys.readouterr().out.splitlines()[1::2] == ["pinned gpu01", "pinned gpu02"]
    kh = next(tmp_path.rglob("known_hosts"))
    assert [k.host for k in hostkeys.read(kh)] == ["10.0.0.11", "10.0.0.12"]
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "B" * 43
    monkeypatch.setattr(hostkeys, "scan", lambda address, port: other)
    assert main(["trust", "gpu01", "-f", str(spec), "--yes"]) == 1
    assert "different host key is already pinned" in capsys.readouterr().err
    assert main(["trust", "gpu01", "-f", str(spec), "--yes", "--replace"]) == 0
    assert [k.key for k in hostkeys.lookup(kh, "10.0.0.11")] == [other.split()[1]]
    assert main(["trust", "nope", "-f", str(spec), "--yes"]) == 2  # not in the spec: usage error
