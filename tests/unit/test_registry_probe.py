"""The probe of the caches' upstreams (render/registry_probe.py), run for real with sh against a stand-in
curl (a script on PATH that answers per URL as an upstream would: a registry's 401, a 200, a 503, no
connection, a hang cut by curl's own bound): the metrics file it writes, atomically; the hostile-string
fuzz covers the spec's side (upstream is host[:port])."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from corral.render import registry_probe as probe
from corral.render.registry import Instance

STANDIN_CURL = """#!/bin/sh
# TEST stand-in for curl: the last argument is the URL; -w '%{http_code}' is what the probe asks for
for a; do url=$a; done
echo "$@" >> "$CURL_LOG"
case $url in
  https://nvcr.io/v2/) printf 401 ;;
  https://registry-1.docker.io/v2/) printf 200 ;;
  https://ctl:5000/v2/) printf 503 ;;
  *) echo "curl: (7) Failed to connect" >&2; printf 000; exit 7 ;;
esac
"""


def caches(*upstreams: str) -> list[Instance]:
    return [Instance("docker-registry", "/etc/docker/registry/config.yml", 5000, 5051, "/s/site")] + [
        Instance(f"corral-registry-cache-{5001 + i}", f"/c{i}.yml", 5001 + i, 5052 + i, f"/s/c{i}", u)
        for i, u in enumerate(upstreams)]


def run_probe(tmp_path: Path, insts: list[Instance]) -> tuple[subprocess.CompletedProcess, Path]:
    bin_dir, out = tmp_path / "bin", tmp_path / "metrics.prom"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(STANDIN_CURL)
    (bin_dir / "curl").chmod(0o755)
    script = probe.probe_script(insts).replace(f"out={probe.METRICS}", f"out={out}")
    assert f"out={out}" in script
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CURL_LOG": str(tmp_path / "curl.log")}
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=30), out


def metrics(path: Path) -> dict[str, str]:
    return {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in path.read_text().splitlines()
            if not line.startswith("#")}


def test_each_upstream_is_up_when_it_answers_below_500(tmp_path):
    done, out = run_probe(tmp_path, caches("nvcr.io", "docker.io", "ctl:5000", "gone.example:5443"))
    assert done.returncode == 0, done.stderr
    got = metrics(out)
    assert {k: v for k, v in got.items() if k.startswith("corral_registry_upstream_up")} == {
        'corral_registry_upstream_up{registry="nvcr.io"}': "1",  # a registry wanting a token answers 401
        'corral_registry_upstream_up{registry="docker.io"}': "1",  # asked at registry-1.docker.io
        'corral_registry_upstream_up{registry="ctl:5000"}': "0",  # 503
        'corral_registry_upstream_up{registry="gone.example:5443"}': "0"}  # no connection
    stamps = [int(v) for k, v in got.items() if k.startswith("corral_registry_upstream_probe_timestamp_seconds")]
    assert len(stamps) == 4 and all(s > 1_700_000_000 for s in stamps)
    assert os.stat(out).st_mode & 0o777 == 0o644 and [p.name for p in tmp_path.iterdir() if p.name.startswith(
        "metrics.prom.")] == []  # written whole, renamed; nothing left
    calls = (tmp_path / "curl.log").read_text().splitlines()
    assert all(f"--connect-timeout {probe.CONNECT_S} --max-time {probe.MAX_S}" in c for c in calls), calls


def test_the_site_registry_alone_is_not_probed_and_units_are_bounded(tmp_path):
    assert probe.caches(caches()) == []
    insts = caches("nvcr.io", "docker.io")
    unit = probe.service_unit(insts)
    assert f"ExecStart={probe.SCRIPT}\n" in unit and "Type=oneshot" in unit
    assert f"TimeoutStartSec={(probe.MAX_S + 5) * 2 + 10}\n" in unit and "ReadWritePaths=/var/lib/prometheus/node-exporter" in unit
    assert f"OnUnitActiveSec={probe.INTERVAL_S}\n" in probe.timer_unit()


def test_the_probe_is_deployed_and_rendered_with_monitoring_and_a_cache(tmp_path, monkeypatch):
    from tests.unit.test_images_deploy import images_spec
    from tests.unit.test_render_slurm_files import _cluster, deploy_files
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    want, _ = deploy_files(cluster, monkeypatch)
    assert "    probe nvcr.io https://nvcr.io\n" in want["ctl"][probe.SCRIPT]
    assert probe.TIMER in want["ctl"] and probe.SCRIPT not in want["gpu01"]


def test_a_hostile_upstream_stays_one_word(tmp_path):
    """The spec refuses such an upstream (spec/rules_images.py); were one to get here, it is one quoted word."""
    planted = tmp_path / "pwned"
    done, out = run_probe(tmp_path, caches(f"x$(touch {planted});touch {planted}"))
    assert done.returncode == 0 and not planted.exists(), done.stderr
    assert metrics(out)[f'corral_registry_upstream_up{{registry="x$(touch {planted});touch {planted}"}}'] == "0"
