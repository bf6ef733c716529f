"""corral's record of the nodes it deployed (engine/node_record.py) and `corral trust --forget`."""

from __future__ import annotations

import json

import pytest

from corral.cli.main import main
from corral.engine import hostkeys, node_record
from corral.engine.node_record import DRAINED, SERVICES_LEFT, Deployed
from corral.errors import CorralError
from corral.spec.loader import load

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute]}
"""
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "A" * 43
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "B" * 43


@pytest.fixture
def cluster(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(SPEC)
    return load(path)


def test_the_record_round_trips_private(cluster):
    entries = {"gpu03": Deployed("gpu03", "10.0.0.13", ("compute",), 2222, "admin", SERVICES_LEFT),
               "ctl": node_record.entry(cluster, cluster.node("ctl"))}
    node_record.write(cluster.state_dir, entries)
    assert node_record.read(cluster.state_dir) == entries
    assert oct(node_record.record_path(cluster.state_dir).stat().st_mode)[-3:] == "600"
    assert [d.name for d in node_record.removed(cluster, entries)] == ["gpu03"]


@pytest.mark.parametrize("text, what", [
    ("{", "not JSON"),
    ('{"version": 2, "nodes": {}}', "not a version 1 record"),
    ('{"version": 1, "nodes": {"gpu03": {"address": "10.0.0.13"}}}', "lacks 'roles'"),
    ('{"version": 1, "nodes": {"gpu03": {"address": "-oProxyCommand=sh", "roles": ["compute"], "ssh_port": 22, '
     '"ssh_user": "root"}}}', "bad address"),
    ('{"version": 1, "nodes": {"gpu03;reboot": {"address": "10.0.0.13", "roles": ["compute"], "ssh_port": 22, '
     '"ssh_user": "root"}}}', "is not a node"),
])
def test_a_record_that_is_not_corrals_is_a_located_error_never_no_node(cluster, text, what):
    path = node_record.record_path(cluster.state_dir)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(CorralError) as exc:
        node_record.read(cluster.state_dir)
    assert what in str(exc.value) and str(path) in str(exc.value) and "remove it" in str(exc.value)


def test_updated_drops_finished_removals_and_keeps_the_rest(cluster):
    record = {"gpu01": node_record.entry(cluster, cluster.node("gpu01")),
              "gpu03": Deployed("gpu03", "10.0.0.13", ("compute",), 22, "root"),
              "gpu04": Deployed("gpu04", "10.0.0.14", ("compute",), 22, "root"),
              "gpu05": Deployed("gpu05", "10.0.0.15", ("compute",), 22, "root")}
    after = node_record.updated(cluster, record, reached=["ctl"], removals={"gpu03": None, "gpu04": DRAINED})
    assert sorted(after) == ["ctl", "gpu01", "gpu04", "gpu05"]  # gpu02: never reached, not recorded
    assert after["gpu04"].pending == DRAINED and after["gpu05"] == record["gpu05"]


def _pin(cluster, *hosts: tuple[str, int, str]) -> None:
    kh = hostkeys.known_hosts_path(cluster.state_dir)
    for address, port, key in hosts:
        hostkeys.add(kh, address, port, key)


def test_trust_forget_drops_the_keys_of_a_removed_node_only(cluster, capsys):
    node_record.write(cluster.state_dir, {
        "gpu03": Deployed("gpu03", "10.0.0.13", ("compute",), 2222, "root", SERVICES_LEFT),
        "gpu04": Deployed("gpu04", "10.0.0.14", ("compute",), 22, "root")})
    _pin(cluster, ("10.0.0.11", 22, KEY), ("10.0.0.13", 22, KEY), ("10.0.0.13", 2222, OTHER), ("gpu03", 22, KEY),
         ("10.0.0.14", 22, OTHER))
    spec = str(cluster.path)
    assert main(["trust", "gpu03", "--forget", "-f", spec]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"forgot gpu03: 10.0.0.13 {hostkeys.fingerprint(KEY)}, ")
    assert "dropped from corral's record" in out
    kh = hostkeys.known_hosts_path(cluster.state_dir)
    assert [k.host for k in hostkeys.read(kh)] == ["10.0.0.11", "10.0.0.14"]
    assert sorted(node_record.read(cluster.state_dir)) == ["gpu04"]
    # a node whose removal has not run yet stays in the record: apply still has to take it out of Slurm
    assert main(["trust", "gpu04", "--forget", "-f", spec]) == 0
    assert sorted(node_record.read(cluster.state_dir)) == ["gpu04"] and "dropped" not in capsys.readouterr().out
    # a node of the spec: its keys only; a second time, nothing pinned
    assert main(["trust", "gpu01", "--forget", "-f", spec]) == 0
    assert main(["trust", "gpu01", "--forget", "-f", spec]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "gpu01: no key pinned"
    assert hostkeys.read(kh) == []


def test_trust_forget_of_an_unknown_node_is_a_usage_error_and_drops_nothing(cluster, capsys):
    _pin(cluster, ("10.0.0.11", 22, KEY))
    assert main(["trust", "gpu[01,09]", "--forget", "-f", str(cluster.path)]) == 2
    err = capsys.readouterr().err
    assert "unknown node 'gpu09': not in the spec nor in corral's record of deployed nodes" in err
    assert len(hostkeys.read(hostkeys.known_hosts_path(cluster.state_dir))) == 1
    assert main(["trust", "gpu01", "--forget", "--replace", "-f", str(cluster.path)]) == 2


def test_the_record_is_in_the_backup_of_the_state_dir(cluster, tmp_path):
    from corral.backup.local_state import pack_state
    node_record.write(cluster.state_dir, {"ctl": node_record.entry(cluster, cluster.node("ctl"))})
    assert node_record.RECORD in pack_state(cluster.state_dir, tmp_path / "state.tar.gz")
    assert json.loads(node_record.record_path(cluster.state_dir).read_text())["version"] == 1
