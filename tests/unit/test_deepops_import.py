"""`corral import deepops`: DeepOps config/ directory -> cluster.yaml (corral.importers.deepops)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.errors import CorralError, SpecError, UsageError
from corral.importers.deepops import import_deepops
from corral.importers.deepops_inventory import Inventory, expand_pattern, jump_host, parse_inventory
from corral.spec.loader import load_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "deepops"
SLURM = FIXTURES / "slurm" / "config"
K8S = FIXTURES / "k8s" / "config"
SPARE = FIXTURES / "spare" / "config"
GPU_STACK = FIXTURES / "gpu-stack" / "config"

SMALL = """\
[all]
head ansible_host=10.9.0.1
n1   ansible_host=10.9.0.11
n2   ansible_host=10.9.0.12

[slurm-master]
head

[slurm-node]
n1
n2
"""


def write(tmp_path: Path, inventory: str, name: str = "config", **files: str) -> Path:
    """A DeepOps config dir at tmp_path/name; files: 'group_vars/all.yml' -> text (use __ for /)."""
    cfg = tmp_path / name
    cfg.mkdir(parents=True)
    (cfg / "inventory").write_text(inventory)
    for rel, text in files.items():
        path = cfg / rel.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return cfg


def by_name(cluster) -> dict:
    return {n.name: n for n in cluster.nodes}


def carried_not(result, needle: str) -> list[str]:
    return [line for line in result.notes if needle in line]


# --- the two fixtures -------------------------------------------------------------------------


def test_slurm_fixture_converts_and_loads():
    result = import_deepops(SLURM)
    cluster = load_text(result.yaml_text)
    assert cluster.spec.scheduler == "slurm"
    assert cluster.name == "ml-pod-a"  # slurm_cluster_name
    nodes = by_name(cluster)
    assert set(nodes) == {"login01", "gpu01", "gpu02", "gpu03", "gpu04", "dgx01"}
    assert nodes["login01"].roles == ("controller", "accounting", "login", "monitoring", "nfs")  # nfs_server_group
    assert nodes["login01"].address == "10.0.1.1"
    for i in range(1, 5):
        assert nodes[f"gpu0{i}"].roles == ("compute",)
        assert nodes[f"gpu0{i}"].address == f"10.0.2.{i}"  # addresses follow the expanded names
    assert nodes["dgx01"].address == "10.0.3.1"
    assert all(n.gpus is None for n in cluster.nodes)  # DeepOps declares no GPU models
    ssh = cluster.spec.ssh
    assert (ssh.user, ssh.key, ssh.port) == ("ubuntu", "~/.ssh/id_rsa", 22)
    assert ssh.jump_host == "ubuntu@10.0.0.254"  # from ansible_ssh_common_args' ProxyCommand
    [part] = cluster.spec.slurm.partitions
    assert (part.name, part.default, part.max_time, part.nodes) == ("batch", True, "7-00:00:00", "ALL")
    nv = cluster.spec.nvidia
    # DeepOps' branch ("580") is kept: plan resolves it to an exact version and the run pins that
    assert (nv.driver.branch, nv.driver.version, nv.driver.kernel_modules) == ("580", None, "open")
    assert (nv.enroot.version, nv.enroot.sha256) == ("3.2.0", "skip")  # DeepOps' defaults, unchecked
    assert (nv.pyxis.version, nv.pyxis.sha256) == ("0.11.1", "skip")
    assert nv.dcgm.enabled and cluster.spec.slurm.gres_autodetect == "nvml"


def test_slurm_fixture_header_and_no_secrets():
    text = import_deepops(SLURM).yaml_text
    first = text.splitlines()[0]
    assert first.startswith("# Imported by `corral import deepops` from ") and str(SLURM) in first
    assert "ChangedFromTheDefaultButStillInPlainText" not in text
    assert "proxy.corp.example" not in text.split("name:", 1)[1].split("proxy:", 1)[0]  # only in proxy:
    assert "# TODO gpus:" in text


def test_slurm_fixture_not_carried_lists_specific_vars():
    result = import_deepops(SLURM)
    nc = result.not_carried
    [ntp] = carried_not(result, "chrony_config_server")
    assert ntp.startswith("group_vars/all.yml:16: chrony_config_server — ") and "no server list" in ntp
    assert carried_not(result, "group_vars/all.yml:8: proxy_env — DeepOps' copy of http_proxy")
    for var, key in (("http_proxy", "proxy.http"), ("https_proxy", "proxy.https"), ("no_proxy", "proxy.no_proxy"),
                     ("nfs_exports", "storage.exports"),
                     ("slurm_enable_nfs_client_nodes", "storage.mounts[].nodes"),
                     ("nfs_client_group", "storage.mounts[].nodes"), ("slurm_allow_ssh_user", "identity.adopt_exempt_users")):
        assert any(line.startswith("group_vars/") and f": {var} — carried to {key}" in line for line in result.mapped), var
    assert carried_not(result, "[slurm-nfs-client] — not read: nfs_client_group names the NFS clients")
    assert carried_not(result, "group_vars/slurm-cluster.yml:23: nfs_mounts — corral adds nosuid and nodev")
    assert carried_not(result, "slurm_password — secrets are not copied")
    assert carried_not(result, "slurm_db_password — secrets are not copied")
    assert [line for line in result.mapped if "slurm_default_job_timelimit — carried to "
            "slurm.partitions[batch].extra.DefaultTime" in line]
    assert not carried_not(result, "nvidia_driver_branch")
    assert [line for line in result.mapped if "group_vars/all.yml:32: nvidia_driver_branch — carried to "
            "nvidia.driver.branch" in line], result.mapped
    assert carried_not(result, "group_vars/all.yml:24: users[0].groups — sudo not carried: a privileged group")
    assert carried_not(result, "group_vars/all.yml:24: users[0].password — ops's password hash is not copied")
    assert carried_not(result, "host_vars/gpu01:3: slurm_cluster_install_cuda (gpu01) — a per-host value")
    assert carried_not(result, "[slurm-cache] — cluster.yaml has no container-registry-cache role")
    assert carried_not(result, "group_vars/k8s_cluster.yml — settings of [k8s_cluster]")
    [gpus] = carried_not(result, "declare gpus: per group")
    assert "dgx01,gpu[01-04]" in gpus and "doctor" in gpus
    # variables the import did use are not reported as dropped
    for used in ("slurm_cluster_name", "slurm_max_job_timelimit", "ansible_user", "ansible_host",
                 "slurm_monitoring_group", "ansible_ssh_common_args"):
        assert not carried_not(result, f" {used} "), used
    # every note is also in the header of the YAML
    for line in nc:
        assert f"#   - {line}" in result.yaml_text


def test_both_schedulers_picks_slurm_and_notes_kubernetes(tmp_path):
    inv = SMALL.replace("[all]\n", "[all]\nkm ansible_host=10.9.0.5\n") + \
        "[kube_control_plane]\nkm\n[etcd]\nkm\n[kube_node]\nn1\nn2\n"
    cfg = write(tmp_path, inv)
    result = import_deepops(cfg)
    cluster = load_text(result.yaml_text)
    assert cluster.spec.scheduler == "slurm" and "km" not in by_name(cluster)
    assert carried_not(result, "[kube-control-plane, kube-node, etcd] — not carried")
    assert carried_not(result, "inventory:2: km — only in [kube-control-plane, etcd]: no role, skipped")
    k8s = load_text(import_deepops(cfg, scheduler="kubernetes").yaml_text)
    assert by_name(k8s)["km"].roles == ("control-plane",) and by_name(k8s)["n2"].roles == ("worker",)
    assert "head" not in by_name(k8s)


def test_dedicated_etcd_host_is_skipped_with_a_note(tmp_path):
    cfg = write(tmp_path, "[kube_control_plane]\ncp1 ansible_host=10.2.0.1\n"
                "[kube_node]\nw1 ansible_host=10.2.0.2\n[etcd]\ne1 ansible_host=10.2.0.3\n")
    result = import_deepops(cfg)
    assert set(by_name(load_text(result.yaml_text))) == {"cp1", "w1"}
    assert carried_not(result, "inventory:6: e1 — only in [etcd]: no role, skipped")


def test_old_kubespray_group_names(tmp_path):
    cfg = write(tmp_path, "[kube-master]\ncp1 ansible_host=10.2.0.1\n[kube-node]\nw1 ansible_host=10.2.0.2\n"
                "[k8s-cluster:children]\nkube-master\nkube-node\n")
    cluster = load_text(import_deepops(cfg).yaml_text)
    assert by_name(cluster)["cp1"].roles == ("control-plane",) and by_name(cluster)["w1"].roles == ("worker",)


def test_ha_pair_login_default_and_single_monitoring_node(tmp_path):
    inv = """\
[all]
ctl1 ansible_host=10.3.0.1
ctl2 ansible_host=10.3.0.2
gpu1 ansible_host=10.3.0.11
[slurm-master]
ctl1
ctl2
[slurm-node]
gpu1
[slurm-metric:children]
slurm-master
[slurm-nfs]
ctl2
"""
    result = import_deepops(write(tmp_path, inv))
    nodes = by_name(load_text(result.yaml_text))
    assert nodes["ctl1"].roles == ("controller", "accounting", "login", "monitoring")
    assert nodes["ctl2"].roles == ("login",)  # the NFS server is listed, no nfs role yet
    assert carried_not(result, "[slurm-nfs] ctl2 — imported without the nfs role")
    # no shared StateSaveLocation in the import: the backup controller is named, not made
    assert carried_not(result, "[slurm-master] ctl2 — imported without the controller role: a backup controller "
                               "needs slurmctld's StateSaveLocation on shared storage mounted on both controllers")
    assert carried_not(result, "[slurm-login] — not defined")
    assert carried_not(result, "[slurm-metric] — 2 hosts; corral monitors from one node: only ctl1")


def test_group_vars_switch_roles_off_and_pick_hosts(tmp_path):
    inv = SMALL + "[slurm-login]\nn1\n[slurm-metric]\nn2\n"
    cfg = write(tmp_path, inv, **{"group_vars__slurm-cluster.yml": "slurm_enable_nfs_server: false\n"
                                  "slurm_monitoring_group: \"slurm-node[0]\"\nslurm_enable_ha: true\n"})
    nodes = by_name(load_text(import_deepops(cfg).yaml_text))
    assert nodes["head"].roles == ("controller", "accounting")
    assert nodes["n1"].roles == ("login", "compute", "monitoring")
    assert nodes["n2"].roles == ("compute",)


def test_hosts_with_different_roles_get_separate_groups_and_names_are_compressed(tmp_path):
    inv = "[all]\n" + "".join(f"gpu{i:02d} ansible_host=10.4.0.{i}\n" for i in range(1, 11)) + \
        "head ansible_host=10.4.1.1\n[slurm-master]\nhead\n[slurm-node]\ngpu[01:10]\n[slurm-login]\ngpu10\n"
    result = import_deepops(write(tmp_path, inv))
    assert 'names: "gpu[01-09]"' in result.yaml_text and 'names: "gpu10"' in result.yaml_text
    nodes = by_name(load_text(result.yaml_text))
    assert nodes["gpu10"].roles == ("login", "compute") and nodes["gpu07"].address == "10.4.0.7"


def test_cluster_name_from_directory_and_sanitized(tmp_path):
    result = import_deepops(write(tmp_path / "My Pod", SMALL))
    assert load_text(result.yaml_text).name == "my-pod"
    assert carried_not(result, "slurm_cluster_name — unset or unusable (DeepOps' default ClusterName")
    cfg = write(tmp_path, SMALL, name="other",
                **{"group_vars__all.yml": "slurm_cluster_name: Prod.Cluster\n"})
    result = import_deepops(cfg)
    assert load_text(result.yaml_text).name == "prod-cluster"
    assert carried_not(result, "group_vars/all.yml:1: slurm_cluster_name — 'Prod.Cluster' imported as")


def test_host_vars_and_fqdn_names_and_key_paths(tmp_path):
    inv = SMALL.replace("n2   ansible_host=10.9.0.12", "N2.cluster.example") + \
        "[all:vars]\nansible_ssh_private_key_file=keys/id_ed25519\nansible_ssh_user=admin\n"
    cfg = write(tmp_path, inv.replace("\nn2\n", "\nN2.cluster.example\n"),
                **{"host_vars__N2.cluster.example.yml": "ansible_host: 10.9.0.12\nrack: b7\n"})
    result = import_deepops(cfg)
    cluster = load_text(result.yaml_text)
    assert by_name(cluster)["n2"].address == "10.9.0.12"
    assert cluster.spec.ssh.user == "admin"
    assert cluster.spec.ssh.key == str((tmp_path / "keys" / "id_ed25519").resolve())
    assert carried_not(result, "N2.cluster.example — imported as n2")
    assert carried_not(result, "host_vars/N2.cluster.example.yml:2: rack (n2) — no cluster.yaml equivalent")


def test_differing_ssh_users_are_reported(tmp_path):
    inv = SMALL.replace("head ansible_host=10.9.0.1", "head ansible_host=10.9.0.1 ansible_user=root") + \
        "[slurm-node:vars]\nansible_user=ubuntu\n"
    result = import_deepops(write(tmp_path, inv))
    assert load_text(result.yaml_text).spec.ssh.user == "ubuntu"
    assert carried_not(result, "ansible_user — differs between hosts (root, ubuntu)")


def test_templated_ssh_vars_are_reported_not_copied(tmp_path):
    cfg = write(tmp_path, SMALL, **{"group_vars__all.yml": "ansible_user: \"{{ lookup('env', 'USER') }}\"\n"})
    result = import_deepops(cfg)
    assert load_text(result.yaml_text).spec.ssh.user == "root"
    assert carried_not(result, "group_vars/all.yml:1: ansible_user — a Jinja template, not imported")


def test_vault_file_and_unknown_group_are_reported(tmp_path):
    cfg = write(tmp_path, SMALL + "[gpu-a100]\nn1\n",
                **{"group_vars__all__vault.yml": "$ANSIBLE_VAULT;1.1;AES256\n6331\n"})
    result = import_deepops(cfg)
    load_text(result.yaml_text)
    assert carried_not(result, "group_vars/all/vault.yml:1: (the whole file) — Ansible Vault-encrypted")
    assert carried_not(result, "[gpu-a100] — not a DeepOps role group")


def test_group_vars_of_groups_not_in_inventory_and_reason_wording(tmp_path):
    cfg = write(tmp_path, SMALL, **{"group_vars__netapp-trident.yml": "trident_version: 23.01\n",
                                    "group_vars__all.yml": "ssh_server_password_login: true\n"
                                                           "grafana_admin_password: hunter2\n"})
    result = import_deepops(cfg)
    assert result.not_carried.count(
        "group_vars/netapp-trident.yml — settings of [netapp-trident], a group not in the inventory") == 1
    assert carried_not(result, "ssh_server_password_login — cluster.yaml has no sshd-hardening setting")
    assert carried_not(result, "grafana_admin_password — secrets are not copied")
    assert "hunter2" not in result.yaml_text


# --- the INI parser ---------------------------------------------------------------------------


def test_ini_parser_ranges_ports_comments_and_vars(tmp_path):
    cfg = write(tmp_path, """\
# comment
; another comment
[all]
a1:2201 ansible_host=10.5.0.1   # trailing comment
b[1:3]
[grp]
b[2:3]
[grp:vars]
quoted='two words'
plain = x=y
[parent:children]
grp   ; why
""")
    problems: list = []
    inv = Inventory(base=cfg, path=cfg / "inventory")
    parse_inventory(inv, problems)
    assert problems == []
    assert list(inv.hosts) == ["a1", "b1", "b2", "b3"]
    assert inv.hosts["a1"].vars["ansible_port"].value == "2201"
    assert inv.hosts["a1"].vars["ansible_host"].value == "10.5.0.1"
    assert inv.hosts["a1"].vars["ansible_host"].where == "inventory:4"
    assert inv.members("parent") == ["b2", "b3"]
    assert inv.groups["grp"].vars["quoted"].value == "two words"
    assert inv.groups["grp"].vars["plain"].value == "x=y"


def test_expand_pattern():
    assert expand_pattern("gpu[01:03]") == ["gpu01", "gpu02", "gpu03"]
    assert expand_pattern("n[a:c]x") == ["nax", "nbx", "ncx"]
    assert expand_pattern("n[0:6:3]") == ["n0", "n3", "n6"]
    with pytest.raises(ValueError):
        expand_pattern("n[5:1]")


@pytest.mark.parametrize("args,expected", [
    ('-o ProxyCommand="ssh -W %h:%p -q ubuntu@10.0.0.1"', "ubuntu@10.0.0.1"),
    ("-o ProxyCommand='ssh -q -W %h:%p -p 2200 jump.example'", "jump.example:2200"),
    ("-J admin@bastion", "admin@bastion"),
    ("-o StrictHostKeyChecking=no -o ProxyJump=ops@10.1.1.1", "ops@10.1.1.1"),
    ("-o StrictHostKeyChecking=no", None),
])
def test_jump_host(args, expected):
    assert jump_host(args) == expected


# --- errors: each located, with the value and the fix ---------------------------------------


def test_missing_directory(tmp_path):
    with pytest.raises(UsageError) as err:
        import_deepops(tmp_path / "nope")
    text = str(err.value)
    assert str(tmp_path / "nope") in text and "not found" in text and "fix:" in text


def test_file_instead_of_directory(tmp_path):
    (tmp_path / "inventory").write_text(SMALL)
    with pytest.raises(UsageError, match="not a directory"):
        import_deepops(tmp_path / "inventory")


def test_no_inventory_file(tmp_path):
    (tmp_path / "group_vars").mkdir()
    with pytest.raises(UsageError) as err:
        import_deepops(tmp_path)
    assert err.value.where == str(tmp_path) and "inventory" in err.value.fix


def _problem(cfg: Path, **kwargs) -> SpecError:
    with pytest.raises(SpecError) as err:
        import_deepops(cfg, **kwargs)
    assert isinstance(err.value, CorralError) and err.value.exit_code == 2
    return err.value


def test_spare_host_in_all_only_is_listed_not_refused():
    result = import_deepops(SPARE)  # mgmt01: in [all], in no role group
    cluster = load_text(result.yaml_text)
    assert set(by_name(cluster)) == {"head01", "gpu01", "gpu02"}
    assert result.not_carried.count(
        "inventory:4: mgmt01 — in [all] but in no DeepOps role group: not part of the cluster") == 1
    assert "10.7.0.1\"" not in result.yaml_text.split("nodes:", 1)[1]


def test_host_in_no_role_group_is_skipped_with_its_groups(tmp_path):
    inv = SMALL.replace("n2   ansible_host=10.9.0.12", "n2 ansible_host=10.9.0.12\nspare\nold") \
        .replace("n1\nn2\n", "n1\n") + "[storage]\nold\n"
    result = import_deepops(write(tmp_path, inv))  # neither has an ansible_host: not needed, not checked
    assert set(by_name(load_text(result.yaml_text))) == {"head", "n1"}
    assert carried_not(result, "inventory:5: spare — in [all] but in no DeepOps role group: not part of the cluster")
    assert carried_not(result, "inventory:6: old — in [storage] but in no DeepOps role group: not part of the")
    assert carried_not(result, "inventory:4: n2 — in [all] but in no DeepOps role group")


def test_gpu_stack_fixture_maps_driver_cuda_dcgm_enroot_pyxis_and_ha():
    result = import_deepops(GPU_STACK)
    cluster = load_text(result.yaml_text)
    nodes = by_name(cluster)
    assert nodes["ctl01"].roles == ("controller", "accounting", "login")
    assert nodes["ctl02"].roles == ("login",)  # slurm_enable_ha: no shared state in the import, so no backup yet
    assert carried_not(result, "[slurm-master] ctl02 — imported without the controller role")
    assert carried_not(result, "slurm_enable_ha — a backup controller needs slurmctld's StateSaveLocation on shared")
    nv = cluster.spec.nvidia
    d = nv.driver
    assert (d.version, d.source, d.kernel_modules) == ("550.127.05", "cuda", "open")
    assert d.repo_url == "https://mirror.example.org/nvidia/cuda/repos"
    assert nv.cuda_toolkit.version == "12.4" and nv.dcgm.enabled is False
    e, p = nv.enroot, nv.pyxis
    assert (e.version, e.cache_path, e.sha256) == ("3.5.0", "/var/lib/enroot-cache/user-$(id -u)", "skip")
    assert e.settings == {"ENROOT_SQUASH_OPTIONS": "-noI -noD -noF -noX -no-duplicates", "ENROOT_MOUNT_HOME": "y"}
    assert (p.version, p.url, p.sha256) == ("0.20.0", "https://mirror.example.org/pyxis/v{version}.tar.gz", "skip")
    assert cluster.spec.slurm.gres_autodetect == "off"
    [warn] = carried_not(result, "WARNING: imported as `skip`")
    assert "nvidia.enroot.sha256: {enroot: <sha256>, enroot+caps: <sha256>}" in warn
    assert "nvidia.pyxis.sha256: <sha256>" in warn
    assert carried_not(result, "enroot_config — lines not carried (ENROOT_CONFIG_PATH ${HOME}/.config/enroot)")
    assert carried_not(result, "slurm_ha_state_save_location — set slurm.state_save_location to a directory on a "
                               "storage.mounts entry mounted on both controllers")
    assert carried_not(result, "nvidia_driver_skip_reboot — corral's driver rollout always drains")
    for mapped in ("nvidia_driver_branch", "nvidia_driver_package_version", "cuda_version", "install_dcgm",
                   "enroot_version", "slurm_pyxis_tarball_url"):
        assert not carried_not(result, f" {mapped} "), mapped


def test_ha_on_with_one_master_is_listed(tmp_path):
    result = import_deepops(write(tmp_path, SMALL, **{"group_vars__all.yml": "slurm_enable_ha: true\n"}))
    assert by_name(load_text(result.yaml_text))["head"].roles[0] == "controller"
    assert carried_not(result, "group_vars/all.yml:1: slurm_enable_ha — a backup controller needs "
                               "slurmctld's StateSaveLocation on shared storage")


def test_duplicate_host_with_different_ips(tmp_path):
    cfg = write(tmp_path, SMALL.replace("[slurm-node]\nn1", "[slurm-node]\nn1 ansible_host=10.9.0.77"))
    err = _problem(cfg)
    [p] = err.problems
    assert p.where == f"{cfg}/inventory:10" and p.value == "10.9.0.77"
    assert "two addresses: 10.9.0.11 (at inventory:3)" in p.message and p.fix
    assert f"{cfg}/inventory:10: host 'n1' has two addresses" in str(err)


def test_same_ip_on_two_hosts(tmp_path):
    err = _problem(write(tmp_path, SMALL.replace("10.9.0.12", "10.9.0.11")))
    assert err.problems[0].where.endswith("inventory:4") and err.problems[0].value == "10.9.0.11"


def test_missing_and_non_ip_ansible_host(tmp_path):
    cfg = write(tmp_path, SMALL.replace("n1   ansible_host=10.9.0.11", "n1")
                .replace("10.9.0.12", "n2.example.com"))
    err = _problem(cfg)
    missing, not_ip = err.problems
    assert missing.where.endswith("inventory:3") and "no ansible_host" in missing.message
    assert "ansible_host=<its IP>" in missing.fix
    assert not_ip.where.endswith("inventory:4") and not_ip.value == "n2.example.com"


def test_bad_inventory_syntax(tmp_path):
    cfg = write(tmp_path, SMALL + "[broken\n[x:weird]\n[y]\nhost1 novalue\nhost2 a='unclosed\n")
    err = _problem(cfg)
    assert [p.where.rsplit(":", 1)[1] for p in err.problems] == ["12", "13", "15", "16"]
    assert "[group:children]" in err.problems[0].fix and err.problems[2].value == "novalue"


def test_invalid_group_vars_yaml(tmp_path):
    cfg = write(tmp_path, SMALL, **{"group_vars__all.yml": "ok: 1\nbad: [unclosed\nmore: 2\n"})
    err = _problem(cfg)
    assert err.problems[0].where.startswith(f"{cfg}/group_vars/all.yml:") and "invalid YAML" in str(err)


def test_no_role_groups_and_empty_required_groups(tmp_path):
    err = _problem(write(tmp_path, "[all]\nx ansible_host=10.0.0.1\n"))
    assert "no host is in a DeepOps role group" in str(err) and "[slurm-master]" in err.problems[0].fix
    err = _problem(write(tmp_path, "[slurm-master]\nh ansible_host=10.0.0.1\n[slurm-node]\n", name="b"))
    [p] = err.problems
    assert p.where == f"{tmp_path}/b/inventory:3" and "no host in [slurm-node]" in p.message


def test_too_many_controllers_and_bad_time_limit(tmp_path):
    inv = SMALL.replace("[slurm-master]\nhead", "[slurm-master]\nhead\nn1\nn2")
    cfg = write(tmp_path, inv, **{"group_vars__slurm-cluster.yml": "slurm_max_job_timelimit: 3 days\n"})
    err = _problem(cfg)
    assert err.problems[0].where.endswith("inventory:6") and "more than 2 hosts" in err.problems[0].message
    assert err.problems[1].where == f"{cfg}/group_vars/slurm-cluster.yml:1"
    assert err.problems[1].value == "3 days"


def test_unknown_scheduler_argument():
    with pytest.raises(UsageError, match="unknown scheduler"):
        import_deepops(SLURM, scheduler="pbs")
