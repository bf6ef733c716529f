"""`corral import deepops` of what is shared and who may log in: NFS exports and mounts (importers/deepops_storage.py),
Slurm HA's state (deepops_ha.py), users (deepops_access.py) and the proxy (deepops_proxy.py), the values each
cannot carry named with the key to set, and nothing secret repeated."""

from __future__ import annotations

from corral.importers.deepops import import_deepops
from corral.spec.loader import load_text
from corral.spec.shared import mount_nodes
from tests.unit.test_deepops_import import SMALL, by_name, carried_not, write

SERVER = "'{{ groups[\"slurm-master\"][0] }}'"


def nfs(exports: str, mounts: str, extra: str = "") -> str:
    return f"nfs_exports:\n{exports}nfs_mounts:\n{mounts}nfs_server_group: slurm-master[0]\n" \
           f"nfs_client_group: slurm-node\n{extra}"


def test_a_nas_outside_the_inventory_and_a_template_server(tmp_path):
    text = nfs("  - {path: /home, options: '10.9.0.0/24(rw,sync,no_subtree_check)'}\n",
               f"  - {{mountpoint: /home, server: {SERVER}, path: /home, options: 'vers=4.2'}}\n"
               "  - {mountpoint: /data, server: nas1.example.com, path: /export/data, options: ro}\n"
               "  - {mountpoint: /scratch, server: '{{ scratch_server }}', path: /scratch, options: rw}\n")
    result = import_deepops(write(tmp_path, SMALL, **{"group_vars__all.yml": text}))
    spec = load_text(result.yaml_text).spec
    [export] = spec.storage.exports
    assert (export.path, str(export.clients), export.options) == ("/home", "10.9.0.0/24", ["rw", "sync",
                                                                                         "no_subtree_check"])
    home, data = spec.storage.mounts
    assert (home.server, home.options, data.server, data.export, data.options) == (
        None, ["vers=4.2"], "nas1.example.com", "/export/data", ["ro"])
    assert carried_not(result, "nfs_mounts[2] — server '{{ scratch_server }}' names no host the import can resolve")
    assert not carried_not(result, "nfs_exports[0] — DeepOps exported")  # a network stays as it was


def test_what_corral_refuses_is_named_not_written(tmp_path):
    text = nfs("  - {path: /home, options: '*(rw,no_root_squash,insecure)'}\n"
               "  - {path: /home/big, options: '*(rw)'}\n  - {path: /etc, options: '*(ro)'}\n"
               "  - {path: /unread, options: '*(rw)'}\n",
               f"  - {{mountpoint: /home, server: {SERVER}, path: /home}}\n"
               f"  - {{mountpoint: /opt/x, server: {SERVER}, path: /elsewhere}}\n")
    result = import_deepops(write(tmp_path, SMALL, **{"group_vars__all.yml": text}))
    cluster = load_text(result.yaml_text)
    [export] = cluster.spec.storage.exports
    assert export.options == ["rw", "root_squash"] and not export.allow_root_equivalent
    assert [m.path for m in cluster.spec.storage.mounts] == ["/home"]
    assert carried_not(result, "nfs_exports[0] — no_root_squash, insecure dropped, root_squash instead")
    assert carried_not(result, "nfs_exports[1] — /home/big overlaps another export")
    assert carried_not(result, "nfs_exports[2] — /etc: corral exports no system directory")
    assert carried_not(result, "nfs_exports[3] — /unread: no imported mount reads it")
    assert carried_not(result, "nfs_mounts[1] — /elsewhere is not among the carried exports of head")
    assert "nfs" in by_name(cluster)["head"].roles


def test_ha_state_off_the_imported_mounts_keeps_one_controller(tmp_path):
    inv = SMALL.replace("[slurm-master]\nhead", "[slurm-master]\nhead\nn1").replace("[slurm-node]\nn1\n", "[slurm-node]\n")
    text = nfs("  - {path: /home, options: '*(rw,sync,no_root_squash)'}\n",
               f"  - {{mountpoint: /home, server: {SERVER}, path: /home}}\n",
               "slurm_enable_ha: true\nslurm_ha_state_save_location: /sw/slurm\n")
    result = import_deepops(write(tmp_path, inv, **{"group_vars__all.yml": text}))
    cluster = load_text(result.yaml_text)
    assert "controller" not in by_name(cluster)["n1"].roles
    assert cluster.spec.storage.exports[0].options == ["rw", "sync", "root_squash"]  # not the state's export
    assert carried_not(result, "[slurm-master] n1 — imported without the controller role: a backup controller "
                               "needs slurmctld's StateSaveLocation on shared storage mounted on both controllers; "
                               "/sw/slurm is on no NFS mount the import carried")


def test_ha_state_on_an_imported_mount_makes_the_backup_and_keeps_its_export_root(tmp_path):
    inv = SMALL.replace("[slurm-master]\nhead", "[slurm-master]\nhead\nn1").replace("[slurm-node]\nn1\n", "[slurm-node]\n")
    text = nfs("  - {path: /sw, options: '*(rw,sync,no_root_squash)'}\n"
               "  - {path: /home, options: '*(rw,sync,no_root_squash)'}\n",
               f"  - {{mountpoint: /sw, server: {SERVER}, path: /sw}}\n"
               f"  - {{mountpoint: /home, server: {SERVER}, path: /home}}\n",
               "slurm_enable_ha: true\n").replace("nfs_client_group: slurm-node", "nfs_client_group: 'slurm-master[1:],slurm-node'")
    result = import_deepops(write(tmp_path, inv, **{"group_vars__all.yml": text}))
    cluster = load_text(result.yaml_text)
    assert by_name(cluster)["n1"].roles[0] == "controller" and cluster.spec.slurm.state_save_location == "/sw/slurm"
    sw, home = cluster.spec.storage.exports
    assert (sw.options, sw.allow_root_equivalent) == (["rw", "sync", "no_root_squash"], True)
    assert home.options == ["rw", "sync", "root_squash"]
    sw_mount, home_mount = cluster.spec.storage.mounts
    assert {n.name for n in mount_nodes(cluster, sw_mount)} == {"head", "n1", "n2"}
    assert {n.name for n in mount_nodes(cluster, home_mount)} == {"n1", "n2"}
    assert carried_not(result, "nfs_mounts[0] — head mounts /sw too: both controllers read slurmctld's state")
    assert [line for line in result.mapped if "[slurm-master] n1 — the backup controller" in line]


def test_users_need_their_homes_on_an_imported_mount(tmp_path):
    text = nfs("  - {path: /data, options: '*(rw)'}\n", f"  - {{mountpoint: /data, server: {SERVER}, path: /data}}\n",
               "users:\n  - {username: ann, uid: 2001}\n")
    result = import_deepops(write(tmp_path, SMALL, **{"group_vars__all.yml": text}))
    assert load_text(result.yaml_text).spec.users == []
    assert carried_not(result, "users — not carried: corral makes homes in /home, which is on no imported mount")


def test_user_fields_that_cannot_be_carried_are_named(tmp_path):
    text = ("groups_to_create: [{name: ml, gid: 3000}, {name: wheel, gid: 3001}]\nusers:\n"
            "  - {username: ann, uid: 2001, group: ml, groups: [ml, sudo, video], home: /data/ann, password: 'x'}\n"
            "  - {username: Bob, uid: 2002}\n  - {username: sys, uid: 500}\n")
    result = import_deepops(write(tmp_path, SMALL, **{"group_vars__all.yml": text}))
    spec = load_text(result.yaml_text).spec
    [ann] = spec.users
    assert (ann.name, ann.uid, ann.group, ann.groups) == ("ann", 2001, "ml", ["ml"])
    assert [(g.name, g.gid) for g in spec.groups] == [("ml", 3000)]
    for needle in ("groups_to_create[1] — ", "users[0].groups — sudo not carried: a privileged group",
                   "users[0].groups — video not carried: not in groups:",
                   "users[0].home — '/data/ann' not carried", "users[1] — 'Bob' not carried",
                   "users[2] — 'sys' not carried", "users[0].password — ann's password hash is not copied"):
        assert carried_not(result, needle), needle
    assert "password" not in result.yaml_text.split("name:", 1)[1]


def test_a_proxy_with_credentials_is_named_never_repeated(tmp_path):
    text = "http_proxy: http://ann:s3cret-pw@proxy.example:3128\nhttps_proxy: http://proxy.example:3128\n"
    result = import_deepops(write(tmp_path, SMALL, **{"group_vars__all.yml": text}))
    proxy = load_text(result.yaml_text).spec.proxy
    assert (proxy.http, proxy.https) == (None, "http://proxy.example:3128")
    [line] = carried_not(result, "http_proxy — not carried (the value is not repeated here)")
    assert "s3cret" not in line and "s3cret" not in result.yaml_text
    assert "s3cret" not in str(result.report.to_json())


def test_kubernetes_operator_driver_and_switches(tmp_path):
    inv = "[all]\ncp ansible_host=10.9.0.1\nw1 ansible_host=10.9.0.11\n[kube_control_plane]\ncp\n[kube_node]\nw1\n" \
          "[k8s_cluster:children]\nkube_control_plane\nkube_node\n"
    cfg = write(tmp_path, inv, **{"group_vars__k8s_cluster.yml": "gpu_operator_driver_version: 580.126.20\n"
                                  "gpu_operator_preinstalled_nvidia_software: true\ndeepops_gpu_operator_enabled: false\n"
                                  "nfs_exports: [{path: /export, options: '*(rw)'}]\n"})
    result = import_deepops(cfg)
    spec = load_text(result.yaml_text).spec
    assert spec.nvidia.driver is None and spec.kubernetes.gpu_operator.driver.source == "preinstalled"
    assert carried_not(result, "gpu_operator_driver_version — not used: gpu_operator_preinstalled_nvidia_software")
    assert [line for line in result.changed if "deepops_gpu_operator_enabled — corral always installs" in line]
    assert carried_not(result, "nfs_exports — a Slurm setting (it maps to storage.exports); this cluster.yaml is "
                               "for kubernetes")
