"""A container image carried in a bundle (issue 37), run on tests/vcluster/test_workbench.py's cluster (imported
there, with tests/vcluster/images.py): an "upstream" registry the test controls (a second docker-registry on ctl:5009, with the registry
node's certificate) holds an image; the bundle's image step fetches it with the real skopeo on the control
host (trusting the cluster's CA through SSL_CERT_FILE, as any site's private upstream would be) into an OCI
layout, sealed and signed with this state dir's bundle key; the loader `apply`/`up --bundle` call after
the components (workflows/images_load.py `load`, for the cluster's spec installing from that bundle)
verifies and unpacks it and pushes the image into the site registry on ctl:5000, a second load changes
nothing, and alice's job on gpu01 runs the image
from the site registry with podman. The upstream is stopped before the load and the job, so the image can
only come from what the bundle carried. The full `corral bundle build --images` resolves every package of
the spec (minutes), so the build here is its image step and `seal`, the same functions."""

from __future__ import annotations

import dataclasses
import shlex
import time

from tests.vcluster.conftest import ssh
from tests.vcluster.oci_image import ANONYMOUS_GET, push
from tests.vcluster.test_users import as_alice

UPSTREAM_PORT = 5009
UNIT = "corral-test-upstream-registry"
UPSTREAM_CONF = f"""version: 0.1
storage: {{filesystem: {{rootdirectory: /var/tmp/{UNIT}}}}}
http:
  addr: ":{UPSTREAM_PORT}"
  tls: {{certificate: /etc/docker/registry/tls/registry.crt, key: /etc/docker/registry/tls/registry.key}}
"""


def _upstream(reg, start: bool) -> None:
    if not start:
        ssh(reg, "ctl", f"systemctl stop {UNIT}; rm -rf /var/tmp/{UNIT} /run/{UNIT}.yml", check=False)
        return
    ssh(reg, "ctl", f"printf %s {shlex.quote(UPSTREAM_CONF)} > /run/{UNIT}.yml && systemd-run --unit {UNIT} "
                    f"/usr/bin/docker-registry serve /run/{UNIT}.yml")
    ssh(reg, "ctl", f"for _ in $(seq 50); do curl -fsS -o /dev/null https://ctl:{UPSTREAM_PORT}/v2/ && exit 0; "
                    "sleep 0.2; done; exit 1")


def test_a_bundled_image_is_loaded_into_the_site_registry_and_alice_runs_it(reg, tmp_path, monkeypatch):
    from corral.bundle import build, images, sign
    from corral.bundle.verify import verify
    from corral.engine.results import NodeResult, RunResult
    from corral.workflows.images_load import load
    cluster = reg.cluster
    ca = cluster.state_dir / "secrets" / "ca" / "ca.pem"
    addr = reg.node("ctl").node.address
    ref = f"{addr}:{UPSTREAM_PORT}/upstream/hello:7"
    _upstream(reg, True)
    try:
        t0 = time.monotonic()
        digest = push(f"https://{addr}:{UPSTREAM_PORT}", "upstream/hello", "7", ca, "carried in the bundle\n")
        monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the upstream's certificate is the cluster CA's
        root = tmp_path / "root"
        (root / "repo").mkdir(parents=True)
        (root / "repo" / "Packages").write_text("")
        (root / "repo" / "Packages.gz").write_bytes(b"")
        carried = images.carry([ref], root)
        assert [(i["ref"], i["digest"]) for i in carried] == [(ref, digest)], carried  # an OCI manifest: as pushed
        home, fpr = sign.ensure_key(cluster.state_dir, cluster.spec.name)
        content = {"cluster": cluster.spec.name, "distribution": "debian bookworm", "packages": [], "images": carried}
        build.seal(root, cluster.spec.name, content, home, fpr, tmp_path / "b.tar")
        print(f"image fetched with skopeo and sealed in {time.monotonic() - t0:.1f} s")
    finally:
        _upstream(reg, False)  # from here on the image can only come from the bundle
    checked = verify(tmp_path / "b.tar", fpr, home)
    assert checked.ok and checked.images == 1, checked.problems
    # the cluster as a spec installing from this bundle sees it (packages.source: bundle); load() is what
    # converge runs after an apply's components: it verifies and unpacks the bundle itself (bundle/serve.py)
    packages = cluster.spec.packages.model_copy(update={"source": "bundle", "bundle": str(tmp_path / "b.tar"),
                                                         "fingerprint": fpr})
    bundled = dataclasses.replace(cluster, spec=cluster.spec.model_copy(update={"packages": packages}))
    t0 = time.monotonic()
    ops = []
    for _ in range(2):
        result = RunResult(run_id="t", command="test", mode="apply", spec_hash="", started="")
        result.nodes["ctl"] = NodeResult("ctl", addr)
        assert load(bundled, result) and result.ok, (result.nodes["ctl"].error, result.warnings)
        ops += [(o.name, o.status, o.reason) for o in result.nodes["ctl"].ops]
    assert ops == [("image ctl:5000/upstream/hello:7 from the bundle", "changed", None),
                   ("image ctl:5000/upstream/hello:7 from the bundle", "unchanged",
                    f"the site registry serves {digest} already")], ops
    print(f"loaded, then found loaded, in {time.monotonic() - t0:.1f} s")
    job = as_alice(reg, "login1", "srun -w gpu01 podman run --rm --network=none ctl:5000/upstream/hello:7 "
                                  "cat /etc/message", check=False, timeout=180)
    assert job.returncode == 0 and job.stdout == "carried in the bundle\n", (job.stdout, job.stderr[-2000:])
    read = ANONYMOUS_GET + "print(get('https://ctl:5000/v2/upstream/hello/tags/list').decode())"
    tags = ssh(reg, "ctl", f"python3 -c {shlex.quote(read)}").stdout
    assert '"7"' in tags, tags
