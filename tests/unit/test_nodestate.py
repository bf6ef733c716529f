"""The node snapshot: one command for every object the deploys manage, parsed purely."""

from pathlib import Path

from corral.deploy.nodestate import NodeState, Want, _union, parse_snapshot, register

CAPTURED = Path(__file__).parent.parent / "fixtures" / "nodestate" / "gpu01.txt"


def test_parse_captured_snapshot():
    snap = parse_snapshot(CAPTURED.read_text().splitlines())
    assert snap.files["/etc/munge/munge.key"] == {"kind": "file", "mode": "400", "user": "munge",
                                                   "group": "munge", "sha256": "b5466521ce1a711b7cd1f7d079c779a88c372f02df00d7d17d73d80284078faa"}
    assert snap.files["/etc/munge"]["kind"] == "dir" and "/nope" not in snap.files
    assert snap.services == {"munge": ("active", "enabled"), "slurmd": ("active", "enabled"),
                             "nosuch": ("inactive", "not-found")}
    assert snap.packages == {"munge": "0.5.15-2+deb12u1"} and snap.apt_lists_age_s == 2685
    assert snap.container == "systemd-nspawn" and snap.blocks["/etc/hosts"].startswith("a320af")


def test_command_runs_a_fixed_number_of_processes_and_quotes_paths():
    many = NodeState().command(paths=tuple(f"/etc/f{i}" for i in range(50)) + ("/etc/with space",),
                               services=tuple(f"s{i}" for i in range(20)), packages=("a", "b"))
    assert many.count("sha256sum") == 1 and many.count("systemctl show") == 1 and many.count("stat -c 'T") == 1
    assert "'/etc/with space'" in many


def test_union_of_registered_wants(monkeypatch):
    import corral.deploy.nodestate as ns
    monkeypatch.setattr(ns, "_DECLARED", [])
    register(Want(paths=("/z",), services=("zz",)))
    union = _union(Want(paths=("/a",), packages=("p",)))
    assert {"/z", "/a"} <= set(union.paths) and "zz" in union.services and "p" in union.packages
