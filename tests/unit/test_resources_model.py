"""The resources model's views (render/resources.py): a service's declared restart policy becomes its drop-in and
a daemon-reload before the service, in every view (render, the snapshot's paths, apply's order); a removed
daemon's paths and unit are in the snapshot's Want."""

from __future__ import annotations

import configparser

from corral.render import resources as r
from corral.render.restart import CALM, Policy, dropin_path

POLICY = Policy(**CALM, binds=True, why="a test daemon")
ITEMS = [r.File("/etc/x.conf", "x\n"), r.Service("x", "x running", policy=POLICY, restart_on=("/etc/x.conf",)),
         r.Removed("y", "y removed", ("/etc/y.conf", "/etc/systemd/system/y.service.d/corral.conf"))]


def test_a_declared_policy_is_its_dropin_before_its_service():
    kinds = [(type(i).__name__, getattr(i, "path", getattr(i, "unit", ""))) for i in r.expanded(ITEMS)]
    assert kinds == [("File", "/etc/x.conf"), ("File", dropin_path("x")), ("Service", "x"), ("Removed", "y")]
    assert r.expanded(ITEMS)[1].name == "x restarted by systemd when it dies"  # restart_policy's op name


def test_the_dropin_is_rendered_seen_by_the_snapshot_and_read_by_systemd_as_declared(tmp_path):
    text = r.files(ITEMS, tmp_path)[dropin_path("x")]
    ini = configparser.ConfigParser(strict=False)
    ini.read_string(str(text))
    assert ini["Unit"]["StartLimitBurst"] == str(POLICY.burst) and ini["Unit"]["After"] == "network-online.target"
    assert ini["Service"]["Restart"] == "on-failure" and ini["Service"]["RestartSec"] == str(POLICY.restart_sec)
    assert dropin_path("x") in r.paths(ITEMS)
    assert {"/etc/y.conf", "/etc/systemd/system/y.service.d/corral.conf"} <= set(r.paths(ITEMS))
    assert r.services(ITEMS) == ("x", "y")


def test_a_service_without_a_policy_gets_no_dropin(tmp_path):
    items = [r.Service("z", "z running")]
    assert r.expanded(items) == items and r.files(items, tmp_path) == {}


def test_every_sysusers_file_a_declared_component_writes_is_one_systemd_sysusers_takes(tmp_path):
    """Each sysusers.d file of the components declared as data, on the golden many-features cluster, read by
    systemd-sysusers itself (--dry-run into an empty root): a GECOS with ':' once failed only on a live node."""
    import shutil
    import subprocess

    import pytest

    from corral.components.views import declared
    from corral.spec.loader import load
    from tests.unit.golden_ops import write_spec
    if shutil.which("systemd-sysusers") is None:
        pytest.skip("systemd-sysusers not installed here")
    cluster = load(write_spec("features", tmp_path / "spec"))
    texts = {path: text for c in declared(cluster) if c.resources is not None for n in cluster.nodes
             if c.applies(cluster, n) for path, text in r.files(c.resources(cluster, n), tmp_path).items()
             if path.startswith("/etc/sysusers.d/")}
    assert {"/etc/sysusers.d/corral-slurmrestd.conf", "/etc/sysusers.d/corral-exporter.conf"} <= set(texts)
    for path, text in texts.items():
        (root := tmp_path / "root" / path.rsplit("/", 1)[1]).mkdir(parents=True)
        (root / "etc").mkdir()
        conf = root / "in.conf"
        conf.write_text(str(text))
        proc = subprocess.run(["systemd-sysusers", f"--root={root}", "--dry-run", str(conf)], capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0 and "not a valid" not in proc.stderr, (path, proc.stderr)


def test_vendor_packages_repositories_and_skips_in_every_view(tmp_path):
    """A vendor's package (pinned `name=version`) is the declaration's `vendor`, never a Debian package; NVIDIA's
    repository makes the snapshot read cuda-keyring; a skip has no file, package or service."""
    from corral.components import Component
    from corral.spec.loader import load
    from tests.unit.golden_ops import write_spec
    items = [r.Repository("NVIDIA CUDA repository", "cuda", "https://example/cuda"),
             r.Packages(("dcgm-exporter=4.1.1-1",), "installed", "monitoring.dcgm_exporter", vendor=True, together=False),
             r.Packages(("curl",), "curl", "a Debian one")]
    assert r.packages(items) == ("cuda-keyring", "dcgm-exporter", "curl")
    c = Component("x", resources=lambda cluster, node: items)
    cluster = load(write_spec("features", tmp_path))
    assert c.vendor(cluster, cluster.nodes[0]) == {"dcgm-exporter": "monitoring.dcgm_exporter"}
    assert c.packages(cluster, cluster.nodes[0]) == {"curl": "a Debian one"}
    skip = [r.Skip("dcgm-exporter (GPU metrics)", "emulated GPUs")]
    assert r.files(skip, tmp_path) == {} and r.packages(skip) == () and r.services(skip) == ()
