"""The emulated NAS of the virtual cluster (virtual/nas.py): which host directory each node sees where."""

from __future__ import annotations

from pathlib import Path

from corral.spec.loader import load_text
from corral.virtual import nas
from corral.virtual.defaults import default_spec

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT alice@laptop"


def test_default_spec_binds_one_home_share_into_every_node_and_the_export():
    cluster = load_text(default_spec(user_key=KEY), "cluster.yaml")
    root = Path("/nas")
    seen = {n.name: nas.binds(cluster, n, root) for n in cluster.nodes}
    share = seen["gpu01"][0][0]
    assert share.parent == root and share.name.startswith("export_srv_nfs_home-")
    assert seen["ctl"] == [(share, "/srv/nfs/home"), (share, "/home")]  # the NFS node: export and mount
    assert seen["gpu01"] == seen["gpu02"] == seen["login1"] == [(share, "/home")]


def test_shares_are_named_by_what_they_serve(tmp_path):
    cluster = load_text("""\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, nfs]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
storage:
  exports: [{path: /srv/nfs}]
  mounts:
    - {path: /home, export: /srv/nfs/home}
    - {path: /data, export: /srv/nfs/data, roles: [compute]}
    - {path: /nas, server: nas.example.com, export: /vol/a, roles: [compute]}
    - {path: /lustre, fstype: lustre, source: "10.0.0.5@tcp:/fs", nodes: gpu01}
""", "cluster.yaml")
    gpu = {path: host for host, path in nas.binds(cluster, cluster.node("gpu01"), tmp_path)}
    export = nas.binds(cluster, cluster.node("ctl"), tmp_path)[0][0]
    assert gpu["/home"] == export / "home" and gpu["/data"] == export / "data"  # sub-directories of one export
    assert gpu["/nas"].parent == gpu["/lustre"].parent == tmp_path and gpu["/nas"] != gpu["/lustre"]
    args = nas.prepare(cluster, cluster.node("gpu01"), tmp_path)
    assert all(a.startswith("--bind=") for a in args) and (export / "home").is_dir()
    assert oct((export / "home").stat().st_mode & 0o777) == "0o755"


def test_a_colon_in_a_path_is_escaped_for_nspawn():
    assert nas._escape("/srv/a:b") == "/srv/a\\:b"
