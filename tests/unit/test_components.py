"""The components' declarations (components/) are the one source of what a node may install: the bundle
resolves what they name (as real servers install it, from a virtual spec too), coverage names each
declared package a bundle lacks, and a deploy that installs an undeclared package is refused at plan."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from corral.bundle.build import requested
from corral.bundle.coverage import gaps
from corral.components.views import declared, node_packages, package_reasons
from corral.errors import CorralError
from corral.spec.loader import load_text
from corral.virtual.defaults import default_spec

SUM = "a" * 64
# every role and every feature that installs a Debian package, on real servers
EVERYTHING = f"""\
name: lab
nodes:
  - {{names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, monitoring, nfs]}}
  - names: gpu01
    addresses: [10.0.0.11]
    roles: [compute]
    gpus:
      model: a100
      count: 4
      mig:
        - {{gpus: all, profiles: [3g.40gb, 4g.40gb]}}
  - {{names: "gpu[02-03]", addresses: [10.0.0.12, 10.0.0.13], roles: [compute], gpus: {{model: h100, count: 8}}}}
  - {{names: login1, addresses: [10.0.0.20], roles: [login]}}
storage:
  exports: [{{path: /srv/home}}]
  mounts: [{{path: /home, export: /srv/home}}]
topology: {{discover: infiniband}}
nvidia:
  mig_parted: {{sha256: {{nvidia-mig-manager: {SUM}}}}}
  enroot: {{version: 3.5.0, sha256: skip}}
  pyxis: {{version: 0.20.0, sha256: skip}}
  cuda_toolkit: {{version: '12.4'}}
acceptance: {{burn: {{enabled: true, sha256: skip}}, nccl: {{enabled: true, across_nodes: true, sha256: skip}}}}
"""


def _load(text: str):
    return load_text(text, "/tmp/corral-components-test/cluster.yaml")


def test_the_bundle_of_the_default_virtual_spec_carries_time_sync_and_nfs_and_no_test_package():
    cluster = _load(default_spec())
    assert cluster.spec.virtual is not None
    wanted = requested(cluster)
    for package in ("chrony", "nfs-kernel-server", "nfs-common", "slurmd", "slurmctld", "slurmdbd", "munge"):
        assert package in wanted, package
    assert "memcached" not in wanted
    # the virtual nodes themselves (containers, the emulated NAS) need none of the three
    assert not {"chrony", "nfs-kernel-server", "nfs-common"} & set(package_reasons(cluster))


def _manifest(names) -> dict:
    return {"packages": [{"package": p, "version": "1"} for p in names]}


def test_every_declared_package_of_every_component_is_one_coverage_names_when_the_bundle_lacks_it():
    cluster = _load(EVERYTHING)
    full = set(package_reasons(cluster))
    seen = set()
    for c in declared(cluster):
        for node in cluster.nodes:
            for package, why in c.packages(cluster, node).items():
                seen.add(c.name)
                assert package in full, (c.name, package)
                lacking = gaps(cluster, _manifest(full - {package}))
                assert f"needs {package} ({node_packages(cluster, node)[package]}): not in the bundle" in \
                    lacking.get(node.name, []), (c.name, node.name, package, lacking.get(node.name))
    # the components that install Debian packages, all exercised by this spec
    assert seen >= {"base", "storage server", "storage mounts", "munge", "mig", "containers", "accounting",
                    "slurm controller", "slurm compute", "pam_slurm_adopt", "slurm login", "acceptance tools",
                    "monitoring", "slurm exporter"}, seen


def test_each_package_has_the_reason_its_component_gives():
    reasons = package_reasons(_load(EVERYTHING))
    assert reasons["chrony"] == ["time sync"]
    assert reasons["nfs-kernel-server"] == ["storage.exports"] and reasons["nfs-common"] == ["storage.mounts"]
    assert reasons["infiniband-diags"] == ["topology.discover"]
    assert "libpam-slurm-adopt" in reasons and "perftest" in reasons and "memcached" not in reasons


def _in_deploy(monkeypatch, cluster, node_name: str, deploy_name: str | None):
    from corral.deploy import operations
    host = SimpleNamespace(data=SimpleNamespace(corral_cluster=cluster, corral_node=cluster.node(node_name)),
                           current_deploy_name=deploy_name)
    monkeypatch.setattr(operations, "host", host)
    return operations


def test_a_deploy_installing_a_package_its_declaration_does_not_name_is_refused(monkeypatch):
    cluster = _load(EVERYTHING)
    ops = _in_deploy(monkeypatch, cluster, "gpu02", "slurm compute")
    ops._declared(["slurmd", "slurm-client", "perftest"])  # declared
    with pytest.raises(CorralError, match="'slurm compute' installs memcached on gpu02, which its declaration "
                                          "does not list"):
        ops._declared(["slurmd", "memcached"])
    ops = _in_deploy(monkeypatch, cluster, "login1", "slurm compute")  # not a compute node: nothing declared
    with pytest.raises(CorralError, match="installs slurmd on login1"):
        ops._declared(["slurmd"])
    ops = _in_deploy(monkeypatch, cluster, "gpu02", "dcgm")  # a vendor package, pinned
    ops._declared(["datacenter-gpu-manager-4-cuda12=1:4.2.3-1"])
    ops = _in_deploy(monkeypatch, cluster, "gpu02", "a test's own deploy")  # no declaration: not checked
    ops._declared(["memcached"])


def test_the_real_servers_view_leaves_the_virtual_spec_alone():
    cluster = _load(default_spec())
    requested(cluster)
    assert cluster.spec.virtual is not None


def test_every_renderer_is_a_declared_component_and_gates_are_the_declarations():
    """`corral render` writes a component's files only where its declaration applies; a renderer under a
    name no component has would never run."""
    from corral.components import gates
    from corral.components.slurm import COMPONENTS
    from corral.workflows.render_slurm import RENDERERS
    from corral.workflows.render_workbench import RENDERERS as WORKBENCH
    names = {c.name for c in COMPONENTS}
    assert set(RENDERERS) | set(WORKBENCH) <= names
    by = {c.name: c for c in COMPONENTS}
    assert by["health"].applies is gates.health and by["slurm login"].applies is gates.login_only
