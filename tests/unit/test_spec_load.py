"""Loading valid specs: YAML -> models -> expanded Cluster (corral.spec.loader)."""

from __future__ import annotations

import ipaddress
import json
import textwrap
from pathlib import Path

import pytest

from corral.errors import CorralError, SpecError
from corral.spec.cluster import Cluster, Node
from corral.spec.loader import load, load_text
from corral.spec.models import GpuSpec

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spec"


def fixture(name: str) -> Cluster:
    return load(FIXTURES / name)


def spec(text: str) -> Cluster:
    return load_text(textwrap.dedent(text), "cluster.yaml")


# --- the reference Slurm spec ------------------------------------------------------------------


def test_slurm_spec_expands_to_nodes():
    c = fixture("slurm_valid.yaml")
    assert c.name == "lab"
    assert c.spec.scheduler == "slurm"
    h100 = GpuSpec(model="h100", count=4, memory_gib=80, nvlink=True)
    assert c.nodes == [
        Node("ctl1", "10.0.0.10", ("controller", "accounting", "monitoring"), None, 16384, 0),
        Node("gpu01", "10.0.0.11", ("compute",), h100, 515000, 1),
        Node("gpu02", "10.0.0.12", ("compute",), h100, 515000, 1),
    ]


def test_slurm_spec_node_helpers():
    c = fixture("slurm_valid.yaml")
    assert [n.name for n in c.with_role("compute")] == ["gpu01", "gpu02"]
    assert [n.name for n in c.with_role("controller")] == ["ctl1"]
    assert c.with_role("login") == []
    assert c.node("gpu02").address == "10.0.0.12"
    assert c.node("gpu02").gpu_count == 4
    assert c.node("ctl1").gpu_count == 0
    assert c.node("ctl1").has("monitoring") and not c.node("ctl1").has("compute")
    with pytest.raises(KeyError):
        c.node("gpu03")


def test_slurm_spec_partitions_qos_accounts():
    s = fixture("slurm_valid.yaml").spec.slurm
    assert [(p.name, p.nodes, p.default, p.max_time, p.qos, p.priority_tier) for p in s.partitions] == [
        ("gpu", "gpu[01-02]", True, "2-00:00:00", "normal", 1),
        ("debug", "gpu01", False, "1:00:00", "high", 10),
    ]
    assert [(q.name, q.priority, q.max_gpus_per_user, q.max_wall, q.preempt, q.preempt_mode)
            for q in s.qos] == [
        ("normal", 0, 8, None, [], "off"),
        ("high", 100, None, "4:00:00", ["normal"], "requeue"),
    ]
    assert [(a.name, a.parent, a.fairshare, a.users, a.qos, a.default_qos) for a in s.accounts] == [
        ("research", None, 10, [], ["normal", "high"], "normal"),
        ("vision", "research", 1, ["alice", "bob"], ["normal"], None),
    ]
    assert s.fairshare.enabled and s.fairshare.weight_fairshare == 10000
    assert s.enforce_limits is True


def test_slurm_spec_paths_are_relative_to_the_spec_file():
    c = fixture("slurm_valid.yaml")
    assert c.base_dir == FIXTURES
    assert c.state_dir == FIXTURES / ".corral"
    assert c.ssh_key() == FIXTURES / "keys" / "id_ed25519"
    assert c.spec.ssh.user == "root" and c.spec.ssh.port == 22


def test_expanded_is_json_and_lists_every_node():
    c = fixture("slurm_valid.yaml")
    data = json.loads(json.dumps(c.expanded()))
    assert data["name"] == "lab" and data["scheduler"] == "slurm"
    assert [n["name"] for n in data["nodes"]] == ["ctl1", "gpu01", "gpu02"]
    assert data["nodes"][1]["gpus"] == {"model": "h100", "count": 4, "memory_gib": 80, "nvlink": True, "mig": None,
                                       "model_unknown_ok": False}
    assert data["nodes"][0]["gpus"] is None
    assert data["virtual"] is None
    assert data["spec_hash"] == c.spec_hash()


def test_spec_hash_is_stable_and_tracks_content():
    text = (FIXTURES / "slurm_valid.yaml").read_text()
    a = load_text(text, "a.yaml").spec_hash()
    assert a == load_text("# a comment\n" + text, "b.yaml").spec_hash()
    assert len(a) == 16
    assert a != load_text(text.replace("count: 4", "count: 8"), "a.yaml").spec_hash()


def test_defaults_of_a_minimal_spec():
    c = spec("""\
        name: tiny
        nodes:
          - names: n1
            addresses: 10.0.0.1
            roles: [controller, compute]
        """)
    assert c.spec.scheduler == "slurm"
    assert c.spec.ssh.user == "root" and c.spec.ssh.port == 22 and c.ssh_key() is None
    assert c.spec.slurm.partitions == [] and c.spec.virtual is None
    assert c.nodes == [Node("n1", "10.0.0.1", ("controller", "compute"), None, None, 0)]


# --- address forms -----------------------------------------------------------------------------


@pytest.mark.parametrize("addresses", [
    "[10.0.0.11, 10.0.0.12]",
    "\n              - 10.0.0.11\n              - 10.0.0.12",
    "10.0.0.[11-12]",
    "10.0.0.11-12",
    "10.0.0.11-10.0.0.12",
    "10.0.0.11,10.0.0.12",
    "'10.0.0.[11-12]'",
])
def test_address_forms(addresses):
    c = spec(f"""\
        name: forms
        nodes:
          - names: ctl1
            addresses: 10.0.0.10
            roles: [controller]
          - names: gpu[01-02]
            addresses: {addresses}
            roles: [compute]
        """)
    assert [(n.name, n.address) for n in c.nodes] == [
        ("ctl1", "10.0.0.10"), ("gpu01", "10.0.0.11"), ("gpu02", "10.0.0.12")]


def test_ipv6_addresses():
    c = spec("""\
        name: six
        nodes:
          - names: ctl1
            addresses: fd00::10
            roles: [controller]
          - names: gpu[1-2]
            addresses: fd00::[11-12]
            roles: [compute]
        """)
    assert [n.address for n in c.nodes] == ["fd00::10", "fd00::11", "fd00::12"]
    assert ipaddress.ip_address(c.nodes[0].address).version == 6


def test_names_are_paired_with_addresses_in_order():
    c = spec("""\
        name: order
        nodes:
          - names: ctl1,login1,gpu[3-4]
            addresses: [10.0.0.4, 10.0.0.3, 10.0.0.2, 10.0.0.1]
            roles: [compute]
            overrides:
              ctl1: {roles: [controller]}
        """)
    assert [(n.name, n.address) for n in c.nodes] == [
        ("ctl1", "10.0.0.4"), ("login1", "10.0.0.3"), ("gpu3", "10.0.0.2"), ("gpu4", "10.0.0.1")]
    assert c.node("ctl1").roles == ("controller",) and c.node("gpu3").roles == ("compute",)


# --- per-node overrides ------------------------------------------------------------------------


def test_overrides():
    c = fixture("overrides.yaml")
    h100x4 = GpuSpec(model="h100", count=4)
    assert c.nodes == [
        Node("ctl1", "10.0.0.10", ("controller",), None, None, 0),
        Node("gpu01", "10.0.0.11", ("compute",), h100x4, 256000, 1),
        Node("gpu02", "10.0.0.99", ("compute",), GpuSpec(model="h100", count=2), 128000, 1),
        Node("gpu03", "10.0.0.13", ("compute", "login"), GpuSpec(model="a100", count=8, memory_gib=40), 256000, 1),
    ]
    # the group itself is untouched
    assert c.spec.nodes[1].gpus == h100x4


def test_override_gpus_on_a_group_without_gpus():
    c = spec("""\
        name: ov
        nodes:
          - names: ctl1
            addresses: 10.0.0.1
            roles: [controller]
          - names: cpu[1-2]
            addresses: 10.0.0.[2-3]
            roles: [compute]
            overrides:
              cpu2: {gpus: {model: l40s, count: 2}}
        """)
    assert c.node("cpu1").gpus is None
    assert c.node("cpu2").gpus == GpuSpec(model="l40s", count=2)


def test_override_to_zero_gpus_means_no_gpus():
    c = spec("""\
        name: ov
        nodes:
          - names: ctl1
            addresses: 10.0.0.1
            roles: [controller]
          - names: gpu[1-2]
            addresses: 10.0.0.[2-3]
            roles: [compute]
            gpus: {model: h100, count: 8}
            overrides:
              gpu1: {gpus: {count: 0}}
        """)
    assert c.node("gpu1").gpus is None and c.node("gpu1").gpu_count == 0
    assert c.node("gpu2").gpu_count == 8


def test_override_keys_may_be_numeric_node_names():
    c = spec("""\
        name: ov
        nodes:
          - names: ctl
            addresses: 10.0.0.1
            roles: [controller]
          - names: "[1-2]"
            addresses: 10.0.0.[2-3]
            roles: [compute]
            overrides:
              1: {memory_mb: 1024}
        """)
    assert [(n.name, n.memory_mb) for n in c.nodes] == [("ctl", None), ("1", 1024), ("2", None)]


# --- other schedulers and shapes ---------------------------------------------------------------


def test_kubernetes_spec():
    c = fixture("kubernetes_valid.yaml")
    assert c.spec.scheduler == "kubernetes"
    a100 = GpuSpec(model="a100", count=8)
    assert c.nodes == [
        Node("cp1", "10.1.0.10", ("control-plane",), None, None, 0),
        Node("worker1", "10.1.0.21", ("worker",), a100, None, 1),
        Node("worker2", "10.1.0.22", ("worker",), a100, None, 1),
        Node("worker3", "10.1.0.23", ("worker",), a100, None, 1),
    ]


def test_kubernetes_ignores_slurm_only_checks():
    # no 'controller'/'compute' and no partitions needed; a partition naming a worker is not checked
    c = spec("""\
        name: k
        scheduler: kubernetes
        nodes:
          - names: cp1,w1
            addresses: 10.0.0.[1-2]
            roles: [worker]
          - names: cp0
            addresses: 10.0.0.3
            roles: [control-plane, worker]
        slurm:
          partitions:
            - name: p
              nodes: nowhere1
        """)
    assert len(c.nodes) == 3


def test_virtual_spec():
    c = fixture("virtual_valid.yaml")
    v = c.spec.virtual
    assert v is not None and v.subnet == ipaddress.IPv4Network("10.213.0.0/24")
    assert v.bridge == "corral0" and v.repo_port == 8080 and v.node_memory_mb == 2048
    assert [n.address for n in c.nodes] == ["10.213.0.10", "10.213.0.11", "10.213.0.12"]
    assert c.expanded()["virtual"]["subnet"] == "10.213.0.0/24"


def test_anchors_and_merge_keys():
    c = fixture("anchors_valid.yaml")
    assert [n.name for n in c.nodes] == ["ctl1", "gpu01", "gpu02", "gpu03", "gpu04", "a100-1", "a100-2"]
    assert c.node("gpu04").address == "10.0.0.14"
    assert c.node("gpu04").gpus == GpuSpec(model="h100", count=8, nvlink=True)
    assert c.node("a100-2").gpus == GpuSpec(model="a100", count=8, nvlink=True)


def test_flow_style_json_spec():
    c = load_text(json.dumps({"name": "j", "nodes": [
        {"names": "n[1-2]", "addresses": "10.0.0.[1-2]", "roles": ["compute"]},
        {"names": "ctl", "addresses": "10.0.0.9", "roles": ["controller"]}]}), "c.json")
    assert [n.name for n in c.nodes] == ["n1", "n2", "ctl"]


def test_two_controllers_are_allowed():
    c = spec("""\
        name: ha
        nodes:
          - names: ctl[1-2]
            addresses: 10.0.0.[1-2]
            roles: [controller]
          - names: gpu1
            addresses: 10.0.0.3
            roles: [compute]
        storage:
          mounts:
            - {path: /srv/slurmctld-state, server: nas1, export: /export/slurmstate, roles: [controller]}
        slurm:
          state_save_location: /srv/slurmctld-state
        """)
    assert len(c.with_role("controller")) == 2


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*_valid.yaml")))
def test_every_valid_fixture_loads(name):
    assert isinstance(fixture(name), Cluster)


# --- load() from disk --------------------------------------------------------------------------


def test_load_from_path_and_str(tmp_path):
    target = tmp_path / "cluster.yaml"
    target.write_text((FIXTURES / "kubernetes_valid.yaml").read_text())
    for arg in (target, str(target)):
        c = load(arg)
        assert c.path == target and c.base_dir == tmp_path


def test_load_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as err:
        load(missing)
    assert str(err.value) == (f"{missing}: spec file not found; fix: pass --spec PATH, set CORRAL_SPEC, "
                              "or run 'corral virtual up'")
    assert err.value.problems[0].where == str(missing)
    assert isinstance(err.value, CorralError) and err.value.exit_code == 2


def test_load_a_directory(tmp_path):
    with pytest.raises(SpecError) as err:
        load(tmp_path)
    assert str(err.value).startswith(f"{tmp_path}: cannot read spec: ")
    assert err.value.problems[0].where == str(tmp_path)


def test_load_not_utf8(tmp_path):
    target = tmp_path / "cluster.yaml"
    target.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(SpecError) as err:
        load(target)
    assert str(err.value).startswith(f"{target}: cannot read spec: 'utf-8' codec can't decode byte 0xff")


def test_load_reports_the_path_it_was_given(tmp_path):
    target = tmp_path / "bad.yaml"
    target.write_text("name: x\nnodes: 5\n")
    with pytest.raises(SpecError) as err:
        load(target)
    assert err.value.problems[0].where == f"{target}:2:8"


# --- paths in the spec -------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), [
    ("keys/id", lambda base, home: base / "keys" / "id"),
    ("../id", lambda base, home: base.parent / "id"),
    ("/etc/corral/id", lambda base, home: Path("/etc/corral/id")),
    ("~/.ssh/id_ed25519", lambda base, home: home / ".ssh" / "id_ed25519"),
])
def test_ssh_key_paths(tmp_path, monkeypatch, key, expected):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    base = tmp_path / "site"
    base.mkdir()
    target = base / "cluster.yaml"
    target.write_text(f"name: p\nssh: {{key: '{key}'}}\nnodes:\n"
                      "  - {names: n1, addresses: 10.0.0.1, roles: [controller, compute]}\n")
    c = load(target)
    assert c.ssh_key() == expected(base, home).resolve()


def test_state_dir_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    text = "name: p\nstate_dir: {}\nnodes:\n  - {{names: n1, addresses: 10.0.0.1, roles: [controller, compute]}}\n"
    assert load_text(text.format("state"), str(tmp_path / "c.yaml")).state_dir == tmp_path / "state"
    assert load_text(text.format("~/st"), str(tmp_path / "c.yaml")).state_dir == tmp_path / "home" / "st"
    assert load_text(text.format("/var/lib/corral"), str(tmp_path / "c.yaml")).state_dir == Path("/var/lib/corral")


def test_redefined_anchor_is_silent():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = spec("""\
            name: re
            nodes:
              - names: ctl1
                addresses: 10.0.0.1
                roles: &r [controller]
              - names: gpu1
                addresses: 10.0.0.2
                roles: &r [compute]
            """)
    assert c.node("gpu1").roles == ("compute",)
