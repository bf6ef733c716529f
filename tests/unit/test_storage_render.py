"""render/storage.py: the exports file, the .mount units and their names, slurmd's drop-in, from a spec
with an NFS home from the cluster's nfs node, an external NAS, a Lustre mount on a hostlist, an IPv6
server and a network of clients; hostile values stopped by the spec or by the renderer's last guard."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from corral.errors import CorralError, SpecError
from corral.render.storage import render_exports, render_mount_unit, requires_mounts_dropin, unit_name
from corral.spec.loader import load_text
from corral.spec.models_storage import Mount, NfsExport

SPEC = """\
name: lab
nodes:
  - names: ctl1
    addresses: [10.0.0.10]
    roles: [controller, accounting, nfs]
  - names: login1
    addresses: [10.0.0.20]
    roles: [login]
  - names: gpu[01-03]
    addresses: 10.0.0.[11-13]
    roles: [compute]
    gpus: {model: h100, count: 8}
storage:
  exports:
    - path: /srv/nfs/scratch
      clients: 10.0.0.0/24
      options: [rw, async, no_root_squash, no_subtree_check]
      allow_root_equivalent: true
    - path: /srv/nfs/home
  mounts:
    - path: /home
      export: /srv/nfs/home
    - path: /data/ml-x
      server: nas.example.com
      export: /export/data
      fstype: nfs4
      options: [ro, soft, timeo=50, _netdev]
      readonly_ok: true
    - path: /lustre
      fstype: lustre
      source: 10.0.0.5@tcp0:/lustre
      nodes: gpu[01-02]
    - path: /archive
      server: fd00::5
      export: /export/archive
      roles: [login]
"""

EXPORTS = """\
# Managed by corral
/srv/nfs/home 10.0.0.11(rw,sync,root_squash,no_subtree_check) \\
    10.0.0.12(rw,sync,root_squash,no_subtree_check) \\
    10.0.0.13(rw,sync,root_squash,no_subtree_check) \\
    10.0.0.20(rw,sync,root_squash,no_subtree_check)
/srv/nfs/scratch 10.0.0.0/24(rw,async,no_root_squash,no_subtree_check)
"""

HOME_UNIT = """\
# Managed by corral
[Unit]
Description=corral: /home from 10.0.0.10:/srv/nfs/home
After=network-online.target
Wants=network-online.target

[Mount]
What=10.0.0.10:/srv/nfs/home
Where=/home
Type=nfs
Options=rw,hard,noatime,_netdev,nosuid,nodev
TimeoutSec=60

[Install]
WantedBy=remote-fs.target
"""


def cluster(text: str = SPEC):
    return load_text(text, "cluster.yaml")


def mount(c, path: str):
    return next(m for m in c.spec.storage.mounts if m.path == path)


# expected values from `systemd-escape --path --suffix=mount PATH` (systemd 252)
@pytest.mark.parametrize("path,name", [
    ("/home", "home.mount"), ("/data/ml-x", "data-ml\\x2dx.mount"), ("/", "-.mount"),
    ("/srv/nfs/home", "srv-nfs-home.mount"), ("/.hidden/a.b", "\\x2ehidden-a.b.mount"),
    ("/scratch/x.y/.z", "scratch-x.y-.z.mount"), ("/a_b:c/d@e+f=g,h", "a_b:c-d\\x40e\\x2bf\\x3dg\\x2ch.mount"),
    ("/data/ü", "data-\\xc3\\xbc.mount"), ("/-a", "\\x2da.mount"), ("/a-", "a\\x2d.mount"), ("/%h", "\\x25h.mount"),
    ("/a b", "a\\x20b.mount"), ("/x\\y", "x\\x5cy.mount"), ("//a//b/", "a-b.mount"), ("/a/./b", "a-b.mount"),
    ("/.", "-.mount"),
])
def test_unit_name_is_systemd_escape(path, name):
    assert unit_name(path) == name


@pytest.mark.parametrize("path", ["relative", "/a/../b", "/a/.."])
def test_unit_name_refuses_what_systemd_escape_refuses(path):
    with pytest.raises(CorralError):
        unit_name(path)


def test_exports_golden():
    assert render_exports(cluster()) == EXPORTS


def test_exports_do_not_depend_on_spec_order():
    login = "  - names: login1\n    addresses: [10.0.0.20]\n    roles: [login]\n"
    text = SPEC.replace(login, "").replace("storage:\n", login + "storage:\n")  # login1 after the GPU nodes
    assert text != SPEC and render_exports(cluster(text)) == EXPORTS


def test_home_unit_golden():
    c = cluster()
    assert render_mount_unit(c, mount(c, "/home")) == HOME_UNIT


def test_nas_lustre_and_ipv6_units():
    c = cluster()
    nas = render_mount_unit(c, mount(c, "/data/ml-x"))
    assert "What=nas.example.com:/export/data\nWhere=/data/ml-x\nType=nfs4\nOptions=ro,soft,timeo=50,_netdev,nosuid,nodev\n" in nas
    lustre = render_mount_unit(c, mount(c, "/lustre"))
    assert "What=10.0.0.5@tcp0:/lustre\nWhere=/lustre\nType=lustre\nOptions=_netdev,nosuid,nodev\n" in lustre
    assert "WantedBy=remote-fs.target" in lustre and "After=network-online.target" in lustre
    ipv6 = render_mount_unit(c, mount(c, "/archive"))
    assert "What=[fd00::5]:/export/archive\n" in ipv6 and "Description=corral: /archive from [fd00::5]:/export/archive\n" in ipv6


def test_local_filesystem_is_not_a_network_mount():
    text = SPEC + "    - path: /fast\n      fstype: xfs\n      source: LABEL=fast\n      options: [noatime]\n"
    c = cluster(text)
    unit = render_mount_unit(c, mount(c, "/fast"))
    assert "network-online" not in unit and "WantedBy=local-fs.target" in unit and "Options=noatime,nosuid,nodev\n" in unit


def test_ipv6_clients_are_not_bracketed():  # exports(5): brackets are character-class wildcards there
    text = SPEC.replace("clients: 10.0.0.0/24", "clients: fd00:10::/64")
    assert "/srv/nfs/scratch fd00:10::/64(rw,async,no_root_squash,no_subtree_check)\n" in render_exports(cluster(text))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_accepts_every_unit_under_its_name(tmp_path):
    c = cluster()
    for m in c.spec.storage.mounts:
        path = tmp_path / unit_name(m.path)
        path.write_text(render_mount_unit(c, m))
        proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0 and str(path.name) not in proc.stderr, proc.stderr


def test_slurmd_dropin_lists_the_nodes_mounts():
    c = cluster()
    by_name = {n.name: requires_mounts_dropin(c, n) for n in c.nodes}
    assert by_name == {
        "ctl1": None,
        "login1": "[Unit]\n# after the shared mounts; a lost mount drains the node (corral-health)\n"
                 "Wants=home.mount data-ml\\x2dx.mount archive.mount\nAfter=home.mount data-ml\\x2dx.mount archive.mount\n",
        "gpu01": "[Unit]\n# after the shared mounts; a lost mount drains the node (corral-health)\n"
                 "Wants=home.mount data-ml\\x2dx.mount lustre.mount\nAfter=home.mount data-ml\\x2dx.mount lustre.mount\n",
        "gpu02": "[Unit]\n# after the shared mounts; a lost mount drains the node (corral-health)\n"
                 "Wants=home.mount data-ml\\x2dx.mount lustre.mount\nAfter=home.mount data-ml\\x2dx.mount lustre.mount\n",
        "gpu03": "[Unit]\n# after the shared mounts; a lost mount drains the node (corral-health)\n"
                 "Wants=home.mount data-ml\\x2dx.mount\nAfter=home.mount data-ml\\x2dx.mount\n",
    }


def test_an_export_nobody_mounts_is_not_exported_to_everyone():
    c = cluster()
    c.spec.storage.exports.append(NfsExport(path="/srv/nfs/orphan"))  # the spec's rules refuse it; the renderer too
    text = render_exports(c)
    assert "# /srv/nfs/orphan: no node of the spec mounts it: not exported\n" in text
    assert not any(line.startswith("/srv/nfs/orphan") for line in text.splitlines())


# --- hostile values ---------------------------------------------------------------------------------

HOME_MOUNT = "    - path: /home\n      export: /srv/nfs/home\n"


@pytest.mark.parametrize("key,value", [
    ("path", "'/home x'"), ("path", '"/home\\nExecStart=/bin/sh"'), ("path", "/home%n"),
    ("export", "'/srv/nfs/home x'"), ("export", "/srv/%h"),
    ("options", "['rw,exec']"), ("options", "['rw x']"), ("options", '["rw\\nWhat=/dev/sda"]'), ("options", "['%i']"),
    ("server", "'nas example.com'"), ("server", "'nas%h.example.com'"), ("server", '"nas\\n.example.com"'),
])
def test_hostile_nfs_mount_values_are_refused_by_the_spec(key, value):
    fields = {"path": "/home", "export": "/srv/nfs/home", key: value}
    hostile = "    - " + "\n      ".join(f"{k}: {v}" for k, v in fields.items()) + "\n"
    with pytest.raises(SpecError, match=rf"storage\.mounts\.0\.{key}"):
        cluster(SPEC.replace(HOME_MOUNT, hostile))


@pytest.mark.parametrize("value", ["'10.0.0.5@tcp:/lustre x'", "10.0.0.5@tcp:/%h", '"a\\nExecStart=/bin/sh"',
                                   "'mon1:6789:/;id'"])
def test_hostile_sources_are_refused_by_the_spec(value):
    text = SPEC.replace("source: 10.0.0.5@tcp0:/lustre", f"source: {value}")
    with pytest.raises(SpecError, match=r"storage\.mounts\.2\.source"):
        cluster(text)


@pytest.mark.parametrize("field,value", [
    ("path", "/home x"), ("path", "/home\nExecStartPre=/bin/sh"), ("path", "/home%n"),
    ("source", "10.0.0.5@tcp:/lustre\n[Service]"), ("source", "a%hb"), ("source", "a'b"), ("source", ""),
    ("options", ["rw", "x y"]), ("options", ["rw,exec"]), ("options", ["%i"]), ("options", ["a\\b"]),
    ("fstype", "lustre x"),
])
def test_the_guard_refuses_what_bypasses_the_spec(field, value):
    c = cluster()
    fields = {"path": "/lustre", "fstype": "lustre", "source": "10.0.0.5@tcp:/lustre", field: value}
    hostile = Mount.model_construct(**fields)  # no validation: as if a type let it through
    with pytest.raises(CorralError, match="refusing to render"):
        render_mount_unit(c, hostile)


def test_the_guard_refuses_hostile_exports():
    c = cluster()
    export = next(e for e in c.spec.storage.exports if e.path == "/srv/nfs/scratch")
    for field, value in (("path", "/srv/x y"), ("options", ["rw", "sec=sys)(rw"]), ("options", ["rw,insecure"])):
        bad = export.model_copy(update={field: value})
        c.spec.storage.exports[0] = bad
        with pytest.raises(CorralError, match="refusing to render"):
            render_exports(c)
