"""Security review 3, N8: the host writes a node's identity into its tree (the base image, overlaid) as root; a link
in the image that leads out of the tree (an absolute one resolves against the host) must carry no write out.
VNode.prepare checks every path it (and the GPU and namespace stand-ins) writes before writing any."""

from __future__ import annotations

import ipaddress

import pytest

from corral.errors import HostToolError
from corral.spec.loader import load_text
from corral.virtual import node as vnode
from corral.virtual.node import VNode, inside

SPEC = """\
name: lab
nodes:
  - {names: gpu01, addresses: [10.0.0.11], roles: [controller, compute], gpus: {model: h100, count: 2}}
"""


def _tree(tmp_path):
    m = tmp_path / "nodes" / "gpu01" / "merged"
    for d in ("etc/ssh", "usr/bin", "usr/lib"):
        (m / d).mkdir(parents=True)
    (m / "bin").symlink_to("usr/bin")  # usr-merge: a link that stays inside is fine
    (m / "etc/machine-id").write_text("\n")
    return m


def test_a_link_inside_the_tree_is_fine_and_one_out_of_it_is_refused(tmp_path):
    m = _tree(tmp_path)
    inside(m, [m / "bin/nvidia-smi", m / "etc/hostname"])
    host = tmp_path / "host-root"
    host.mkdir()
    (m / "root").symlink_to(host)  # absolute: the host's directory, not the image's
    with pytest.raises(HostToolError, match="root/.ssh/authorized_keys leads out of the node's tree"):
        inside(m, [m / "etc/hostname", m / "root/.ssh/authorized_keys"])
    (m / "etc/hostname").symlink_to("../../../../host-root/shadow")  # relative, and out
    with pytest.raises(HostToolError, match="etc/hostname leads out"):
        inside(m, [m / "etc/hostname"])


@pytest.mark.attack
def test_prepare_refuses_before_it_writes_anything(tmp_path, monkeypatch):
    m = _tree(tmp_path)
    host = tmp_path / "host-root"
    host.mkdir()
    (m / "root").symlink_to(host)
    monkeypatch.setattr(vnode, "is_mounted", lambda path: True)  # the overlay: the tree above stands for it
    node = load_text(SPEC, "cluster.yaml").nodes[0]
    with pytest.raises(HostToolError):
        VNode(node, tmp_path, "corral-lab").prepare(tmp_path / "image", ipaddress.ip_network("10.0.0.0/24"),
                                                    "http://10.0.0.1:8080/", "ssh-ed25519 AAAA corral")
    assert list(host.iterdir()) == [] and not (m / "etc/hostname").exists()


def test_corrals_own_absolute_wants_links_from_an_earlier_boot_are_fine(tmp_path):
    """A node prepared again (a restart): the wants links corral made at its first boot are absolute, as systemd
    writes them; only the directory they are in must resolve inside."""
    from corral.virtual import gpu, nsid
    m = _tree(tmp_path)
    for rel, unit in ((gpu.PROCFS_WANTS, gpu.PROCFS_UNIT), (nsid.WANTS, nsid.UNIT)):
        (m / rel).parent.mkdir(parents=True, exist_ok=True)
        (m / rel).symlink_to(f"/{unit}")
    links = (m / gpu.PROCFS_WANTS, m / nsid.WANTS)
    inside(m, [m / "etc/hostname"], links)
    with pytest.raises(HostToolError):
        inside(m, [m / gpu.PROCFS_WANTS])  # written through, it would land on the host's unit
