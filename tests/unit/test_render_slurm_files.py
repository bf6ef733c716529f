"""`corral render` on Slurm specs (workflows/render_slurm.py; monitoring's files from its resources): every file the Slurm
deploys install, per node. Checked against the deploys themselves: every declared component is prepared
without SSH (pyinfra's State over the spec's inventory, as tests/unit/deploy_ops.py does) and each
file-writing operation records what it installs, as it declares (deploy/installs.py), in the run's
context: render writes the same paths with the same content on the same nodes, secrets replaced by a
placeholder. No secret value reaches the output tree,
and render reads no state-dir secret nor makes one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyinfra
import pytest
from pyinfra.api import Config, State

from corral.engine import run_context
from corral.engine.pyinfra_seam import add_deploy
from corral.deploy import components
from corral.spec.releases import slurm_tuple
from corral.deploy import nvidia_driver as deploy_driver
from corral.deploy import users as deploy_users
from corral.engine.inventory import build_inventory
from corral.facts.accounts import Accounts
from corral.facts.ibnetdiscover import save_fabric_cache
from corral.facts.records import NodeHW
from corral.facts.slurm import save_hw_cache
from corral.spec.loader import load, load_text
from corral.virtual.defaults import default_spec
from corral.workflows.render_files import render
from corral.workflows.render_slurm import BLOCK

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "render"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT alice@laptop"
BIND_PW, BMC_PW, DB_PW, GRAFANA_PW = "Bind-Pw-7qZ2xK", "Bmc-Pw-4kQ9zL", "Db-Pw-Zq81mXc3", "Gr-Pw-Lw20pQ"
MUNGE = b"munge-key-" + bytes(range(48, 112))
SUM = "a" * 64
REAL = f"""\
name: lab
nodes:
  - {{names: "ctl[1-2]", addresses: "10.0.0.[1-2]", roles: [controller]}}
  - {{names: db1, addresses: [10.0.0.5], roles: [accounting, monitoring]}}
  - {{names: nfs1, addresses: [10.0.0.6], roles: [nfs]}}
  - {{names: login1, addresses: [10.0.0.8], roles: [login]}}
  - {{names: "gpu[1-2]", addresses: "10.0.1.[11-12]", roles: [compute], gpus: {{model: h100, count: 4}}}}
  - names: mig1
    addresses: [10.0.1.21]
    roles: [compute]
    gpus:
      model: a100
      count: 2
      mig:
        - {{gpus: "0-1", profiles: [3g.40gb, 4g.40gb]}}
  - {{names: cpu1, addresses: [10.0.3.1], roles: [compute]}}
storage:
  exports:
    - {{path: /srv/nfs/home}}
    - {{path: /srv/nfs/state, options: [rw, sync, no_root_squash], allow_root_equivalent: true}}
    - {{path: /srv/nfs/sw}}
  mounts:
    - {{path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}}
    - {{path: /srv/slurmctld-state, export: /srv/nfs/state, roles: [controller]}}
    - {{path: /sw, export: /srv/nfs/sw}}
software: {{site_trees: [/opt/site/modules]}}
slurm:
  version: "24.11"
  clean_jobs: true
  state_save_location: /srv/slurmctld-state
  accounts:
    - {{name: research, users: [alice]}}
users:
  - {{name: alice, uid: 2001, ssh_keys: ["{KEY}"], accounts: [research]}}
  - {{name: bob, uid: 2002, accounts: [research]}}
identity:
  pam_slurm_adopt: true
  ldap:
    uri: [ldaps://ldap.example.com]
    base: dc=example,dc=com
    ca_cert: ldap-ca.pem
    bind_dn: cn=reader,dc=example,dc=com
    bind_password_file: ldap-bind
power:
  enabled: true
  exclude: "mig1,cpu1"
  bmc:
    credentials_file: bmc.cred
    nodes:
      - {{names: "gpu[1-2]", addresses: "10.9.0.[11-12]"}}
monitoring:
  alerts:
    receivers: [{{name: ops, webhook: "https://hooks.example.com/x"}}]
  grafana: {{version: 11.2.0}}
nvidia:
  driver: {{version: "550.127.05"}}
  cuda_toolkit: {{version: "12.4"}}
  container_toolkit: {{engine: docker, version: 1.17.3-1}}
  enroot: {{version: 3.5.0, sha256: {{enroot: {SUM}, enroot+caps: {SUM}}}}}
  pyxis: {{version: 0.20.0, sha256: {SUM}}}
  mig_parted: {{sha256: {{nvidia-mig-manager: {SUM}}}}}
acceptance: {{burn: {{enabled: true, sha256: {SUM}}}}}
proxy: {{http: "http://proxy.example.com:3128", https: "http://proxy.example.com:3128"}}
packages: {{hold: [slurmd]}}
"""


def _cluster(tmp_path: Path, text: str):
    (tmp_path / ".corral" / "ssh").mkdir(parents=True, exist_ok=True)
    (tmp_path / ".corral" / "ssh" / "id_ed25519").write_text("not a key: nothing connects\n")
    (tmp_path / "ldap-ca.pem").write_bytes((FIXTURES / "ldap" / "ca.pem").read_bytes())
    (tmp_path / "ldap-bind").write_text(BIND_PW + "\n")
    (tmp_path / "bmc.cred").write_text(f"admin:{BMC_PW}\n")
    (tmp_path / "cluster.yaml").write_text(text)
    return load(tmp_path / "cluster.yaml")


def _state_secrets(cluster) -> None:
    """Known secrets in the state dir, as an earlier apply would have left them."""
    d = Path(cluster.state_dir) / "secrets"
    d.mkdir(parents=True, exist_ok=True)
    (d / "munge.key").write_bytes(MUNGE)
    (d / "slurmdbd-db-password").write_text(DB_PW)
    (d / "grafana-admin-password").write_text(GRAFANA_PW)


class _Host:
    """pyinfra's host, with the facts a deploy reads while it is prepared answered here (no SSH)."""

    FACTS = {"LocalAccounts": Accounts(), "AccountsByKey": Accounts(), "PciDevices": [],
             "LinuxDistribution": {"name": "Debian", "major": 12, "release_meta": {"ID": "debian", "VERSION_ID": "12"}}}

    def __getattr__(self, name):
        return getattr(pyinfra.host, name)

    def get_fact(self, fact, **kwargs):
        return self.FACTS[fact.__name__]


def deploy_files(cluster, monkeypatch, hw=None, fabric=None, version=None) -> tuple[dict, set]:
    """{node: {path: content}} every declared component would install, prepared without SSH (what each
    file-writing operation declares it installs, deploy/installs.py; not those made on the node from what is
    there); and the (node, path) of the files whose content is secret."""
    monkeypatch.setattr(deploy_users, "host", _Host())
    monkeypatch.setattr(deploy_driver, "host", _Host())
    inventory = build_inventory(cluster)
    state = State(inventory, Config(), check_for_changes=False)
    ctx = run_context.current()
    controllers = cluster.with_role("controller")  # the Slurm the controller's release ships, as render's
    ctx.hw, ctx.fabric = hw or {}, fabric or {}
    ctx.slurm_version = version or slurm_tuple(controllers[0].os if controllers else None)
    for host in inventory:
        for deploy in components(cluster):
            add_deploy(state, deploy, host=host)
    files = {host.name: {path: content for path, (content, _) in ctx.installs.get(host.name, {}).items()
                         if content is not None} for host in inventory}  # None: made
    # on the node, named in NOTES.txt (tests/unit/test_render_every_file.py)
    secret = {(node, path) for node, got in ctx.installs.items() for path, (_, hidden) in got.items() if hidden}
    return files, secret


def rendered(out: Path, cluster) -> dict[str, dict[str, bytes]]:
    from corral.workflows.render_files import _safe
    done = render(cluster, out)
    return {node: {p: (out / node / _safe(p)).read_bytes() for p in paths} for node, paths in done["files"].items()}


SECRETS = (BIND_PW, BMC_PW, DB_PW, GRAFANA_PW)
PLACEHOLDER = re.compile(rb"<secret:not-rendered:[^>\s]+>")


def _hidden(content, ours: bytes) -> bool:
    """The deploy's secret file, as render writes it: the secret values replaced by a placeholder."""
    theirs = content.encode() if isinstance(content, str) else content
    for value in (MUNGE, f"admin:{BMC_PW}".encode(), *(s.encode() for s in SECRETS)):
        theirs = theirs.replace(value, b"SECRET")
    return PLACEHOLDER.sub(b"SECRET", ours).strip() == theirs.strip() and PLACEHOLDER.search(ours) is not None


def assert_same(out: dict, want: dict, secret: set) -> None:
    assert out.keys() == {n for n, files in want.items() if files}
    for node, files in want.items():
        ours = set(out.get(node, {}))
        assert (node, ours - set(files), set(files) - ours) == (node, set(), set())
        for path, content in files.items():
            if (node, path) in secret:
                assert _hidden(content, out[node][path]), (node, path)
            else:
                assert out[node][path] == (content.encode() if isinstance(content, str) else content), (node, path)


def assert_no_secret(out_dir: Path) -> None:
    for p in out_dir.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            assert MUNGE not in data and not any(s.encode() in data for s in SECRETS), p


def test_virtual_default_spec_every_node_gets_its_deploys_files(tmp_path, monkeypatch):
    cluster = _cluster(tmp_path, default_spec(user_key=KEY))
    out = rendered(tmp_path / "out", cluster)
    assert not (Path(cluster.state_dir) / "secrets").exists(), "render reads no secret and makes none"
    _state_secrets(cluster)
    want, secret = deploy_files(cluster, monkeypatch)
    assert_same(out, want, secret)
    assert_no_secret(tmp_path / "out")
    ctl, gpu, login = out["ctl"], out["gpu01"], out["login1"]
    common = {"/etc/hosts.corral-block", "/etc/munge/munge.key",
              "/etc/ssh/sshd_config.d/corral-users.conf", "/etc/default/prometheus-node-exporter",
              "/etc/systemd/system/chrony.service.d/corral-restart.conf"}
    assert common <= set(ctl) & set(gpu) & set(login)
    # users' keys where users log in only (spec/access.py): not on the controller
    assert "/etc/ssh/authorized_keys/alice" in set(gpu) & set(login) and "/etc/ssh/authorized_keys/alice" not in ctl
    assert {"/etc/slurm/slurm.conf", "/etc/slurm/gres.conf", "/etc/slurm/cgroup.conf", "/etc/slurm/plugstack.conf",
            "/etc/slurm/slurmdbd.conf", "/etc/prometheus/prometheus.yml", "/etc/prometheus/rules/corral.yml",
            "/etc/systemd/system/corral-slurm-exporter.service", "/usr/local/lib/corral/slurm_exporter.py",
            "/etc/systemd/system/slurmctld.service.d/corral-restart.conf"} <= set(ctl)
    assert {"/usr/local/sbin/corral-health", "/usr/local/lib/corral/health.py", "/usr/local/sbin/corral-prolog",
            "/usr/local/lib/corral/jobhooks.py", "/etc/corral/job-env", "/etc/corral/slurmd-state",
            "/etc/systemd/system/slurmd.service.d/corral.conf", "/etc/security/corral-adopt.conf",
            "/etc/systemd/system/slurmd.service.d/corral-mounts.conf"} <= set(gpu)
    assert {"/etc/slurm/slurm.conf", "/etc/slurm/plugstack.conf"} <= set(login) and "/etc/slurm/gres.conf" not in login
    assert ctl["/etc/munge/munge.key"] == b"<secret:not-rendered:state-dir/secrets/munge.key>"
    notes = (tmp_path / "out" / "NOTES.txt").read_text()
    assert "Grafana skipped on ctl: virtual cluster" in notes and "DCGM skipped on gpu01, gpu02" in notes
    assert "Not rendered here yet" not in notes


def test_real_spec_every_component_and_no_secret_written(tmp_path, monkeypatch):
    cluster = _cluster(tmp_path, REAL)
    _state_secrets(cluster)
    hw = {n: NodeHW(64, 2, 16, 2, 512000) for n in ("gpu1", "cpu1")}
    save_hw_cache(cluster.state_dir, hw)
    out = rendered(tmp_path / "out", cluster)
    want, secret = deploy_files(cluster, monkeypatch, hw=hw, version=(24, 11))
    assert_same(out, want, secret)
    assert_no_secret(tmp_path / "out")
    ctl1, ctl2, db, nfs, login = out["ctl1"], out["ctl2"], out["db1"], out["nfs1"], out["login1"]
    gpu, mig, cpu = out["gpu1"], out["mig1"], out["cpu1"]
    everywhere = {"/etc/sssd/sssd.conf", "/etc/sssd/corral-ca.pem", "/etc/environment.corral-block",
                  "/etc/apt/apt.conf.d/80corral-proxy", "/etc/systemd/system/sssd.service.d/corral-restart.conf"}
    assert all(everywhere <= set(files) for files in out.values())
    assert b"ldap_default_authtok = <secret:not-rendered:identity.ldap.bind_password_file=" in ctl1["/etc/sssd/sssd.conf"]
    assert "/etc/apt/preferences.d/corral-slurm" in ctl1 and "/etc/apt/preferences.d/corral-slurm" not in nfs
    assert "/etc/exports.d/corral.exports" in nfs and set(nfs) & {p for p in ctl1 if p.endswith(".mount")} == set()
    assert {"/etc/systemd/system/home.mount", "/etc/systemd/system/srv-slurmctld\\x2dstate.mount",
            "/etc/systemd/system/slurmctld.service.d/corral-state.conf"} <= set(ctl2)
    assert {"/usr/local/lib/corral/power.py", "/usr/local/sbin/corral-power-resume", "/etc/corral/power.json",
            "/etc/corral/bmc-credentials"} <= set(ctl1) & set(ctl2)
    assert "/etc/corral/power.json" not in gpu
    assert "/usr/local/lib/corral/slurm_exporter.py" in ctl1 and "/usr/local/lib/corral/slurm_exporter.py" not in ctl2
    assert {"/etc/slurm/slurmdbd.conf", "/etc/grafana/grafana.ini", "/etc/apt/sources.list.d/grafana.list",
            "/etc/apt/preferences.d/corral-grafana", "/etc/prometheus/alertmanager.yml",
            "/var/lib/grafana/dashboards/corral/corral-cluster.json"} <= set(db)
    assert {"/etc/modprobe.d/corral-blacklist-nouveau.conf", "/etc/apt/preferences.d/corral-dcgm",
            "/etc/corral/dcgm-exporter/fields.csv", "/etc/systemd/system/corral-dcgm-exporter.service",
            "/etc/apt/sources.list.d/nvidia-container-toolkit.list", "/etc/corral/nvidia-ctk-runtime",
            "/etc/systemd/system/docker.service.d/corral-proxy.conf", "/usr/local/share/corral/gpu-burn-build",
            "/etc/enroot/enroot.conf"} <= set(gpu)
    assert {"/etc/corral/mig-parted.json", "/etc/systemd/system/corral-mig.service"} <= set(mig)
    modules = {"/etc/lmod/modulespath", "/usr/local/share/corral/modulefiles/openmpi/4.1.lua",
               "/usr/local/share/corral/modulefiles/cuda/12.4.lua"}  # software: what corral installed there
    assert modules <= set(gpu) & set(login) & set(cpu) and not modules & (set(ctl1) | set(nfs) | set(db))
    acceptance = "/usr/local/share/corral/modulefiles/corral-acceptance/1.lua"
    assert acceptance in set(gpu) & set(mig) and acceptance not in set(cpu) | set(login)
    assert b"/opt/site/modules\n" in login["/etc/lmod/modulespath"]
    assert ctl1["/etc/slurm/job_container.conf"].endswith(b"BasePath=/var/lib/slurm/job_tmp\nDirs=/tmp,/dev/shm\n")
    assert b'"clean_jobs": {' in gpu["/etc/corral/jobhooks.json"] and "/usr/local/lib/corral/jobclean.py" in gpu
    assert "/etc/corral/mig-parted.json" not in gpu and "/etc/modprobe.d/corral-blacklist-nouveau.conf" not in cpu
    assert "/etc/ssh/authorized_keys/alice" in cpu and "/etc/ssh/authorized_keys/bob" not in cpu
    assert "/etc/security/corral-adopt.conf" in cpu and "/etc/security/corral-adopt.conf" not in login
    assert db["/etc/grafana/grafana.ini"].count(b"admin_password = <secret:not-rendered:state-dir/secrets/grafana") == 1
    assert b"StoragePass=<secret:not-rendered:state-dir/secrets/slurmdbd-db-password>" in db["/etc/slurm/slurmdbd.conf"]
    assert ctl1["/etc/corral/bmc-credentials"].startswith(b"<secret:not-rendered:power.bmc.credentials_file=")
    notes = (tmp_path / "out" / "NOTES.txt").read_text()
    for named in ("for Slurm 24.11 (slurm.version)", "No hardware facts for gpu2, mig1", "/var/lib/corral/apt-holds",
                  "/etc/nsswitch.conf", "/var/lib/corral/users", "/etc/pam.d/sshd", "corral-nvidia-driver",
                  "spank_pyxis.so", "nvidia-container-toolkit-keyring.gpg", "/etc/apt/keyrings/grafana.asc",
                  "gpu_burn"):
        assert named in notes, named


def test_node_option_writes_that_node_only(tmp_path):
    cluster = _cluster(tmp_path, REAL)
    done = render(cluster, tmp_path / "out", node="cpu1")
    assert list(done["files"]) == ["cpu1"] and not (tmp_path / "out" / "gpu1").exists()
    assert (tmp_path / "out" / "cpu1" / "usr/local/sbin/corral-prolog").is_file()
    assert not (Path(cluster.state_dir) / "secrets").exists()


def test_a_missing_secret_or_ca_is_named_never_read(tmp_path):
    cluster = _cluster(tmp_path, REAL)
    (tmp_path / "ldap-bind").unlink()
    (tmp_path / "bmc.cred").unlink()
    (tmp_path / "ldap-ca.pem").unlink()
    done = render(cluster, tmp_path / "out")
    assert "/etc/corral/bmc-credentials" in done["files"]["ctl1"]
    assert "/etc/sssd/corral-ca.pem" not in done["files"]["ctl1"]
    assert any(n.startswith("/etc/sssd/corral-ca.pem: ") and "cannot read the LDAP CA certificate" in n
               for n in done["notes"])


def test_topology_from_the_fabric_cache(tmp_path, monkeypatch):
    from corral.deploy.slurm import TOPOLOGY_CONF
    text = (GOLDEN / "fabric_tree" / "cluster.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if "ibnetdiscover_file" not in line) + "\n"
    cluster = _cluster(tmp_path, text)
    fabric = {"gpu01": (FIXTURES / "fabric" / "fat_tree.txt").read_text()}
    empty = rendered(tmp_path / "none", cluster)
    assert TOPOLOGY_CONF not in empty["ctl"]
    save_fabric_cache(cluster.state_dir, fabric)
    out = rendered(tmp_path / "out", cluster)
    golden = (GOLDEN / "fabric_tree" / "slurm-22.05" / "topology.conf").read_text().splitlines()
    ours = out["ctl"][TOPOLOGY_CONF].decode().splitlines()
    assert ours[2] == "# discovered from ibnetdiscover on gpu01" and ours[:2] + ours[3:] == golden[:2] + golden[3:]
    _state_secrets(cluster)
    want, secret = deploy_files(cluster, monkeypatch, fabric=fabric)
    assert_same(out, want, secret)


@pytest.mark.parametrize("spec", ["hetero", "power", "no_accounting"])
def test_golden_specs_match_their_deploys(tmp_path, monkeypatch, spec):
    for f in (GOLDEN / spec).iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path / f.name)
    cluster = load_text((tmp_path / "cluster.yaml").read_text(), str(tmp_path / "cluster.yaml"))
    (tmp_path / ".corral" / "ssh").mkdir(parents=True, exist_ok=True)
    (tmp_path / ".corral" / "ssh" / "id_ed25519").write_text("x\n")
    _state_secrets(cluster)
    if (tmp_path / "bmc-credentials").exists():
        (tmp_path / "bmc-credentials").write_text(f"admin:{BMC_PW}\n")
    out = rendered(tmp_path / "out", cluster)
    want, secret = deploy_files(cluster, monkeypatch)
    assert_same(out, want, secret)
    assert_no_secret(tmp_path / "out")


def test_bundle_source_key_and_sources_from_the_bundle(tmp_path, monkeypatch):
    """The bundle's signed-by keyring is the pinned key alone (bundle/trust.py), never the key file the bundle
    carries: a bundle whose carried key is not the pinned one gets a note, not a rendered keyring."""
    import io
    import json
    import tarfile

    from corral.bundle import sign
    from corral.render.bundle_source import KEYRING, LIST, ONLY
    from tests.unit.test_bundle import make
    if shutil.which("gpg") is None or shutil.which("gpgv") is None:
        pytest.skip("gpg and gpgv sign and check bundles (bootstrap installs them)")
    text = REAL.replace("packages: {hold: [slurmd]}", "packages: {source: bundle, bundle: b.tar, serve: 10.0.0.100:8080}")
    cluster = _cluster(tmp_path, text)
    missing = render(cluster, tmp_path / "none")
    assert {LIST, ONLY} <= set(missing["files"]["cpu1"]) and KEYRING not in missing["files"]["cpu1"]
    assert any(n.startswith(f"{KEYRING} (the bundle's public key)") for n in missing["notes"])
    with tarfile.open(tmp_path / "b.tar", "w") as tar:
        for name, data in (("corral-bundle.gpg", b"\x99\x01public key"), ("manifest.json", json.dumps({}).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    unpinned = render(cluster, tmp_path / "unpinned")
    assert KEYRING not in unpinned["files"]["cpu1"] and any("(CorralError): not rendered" in n for n in unpinned["notes"])
    (tmp_path / "b.tar").unlink()
    home, fpr = sign.ensure_key(tmp_path / "builder", "t")
    make(tmp_path, (None, home, fpr))
    cluster = _cluster(tmp_path, text.replace("serve: 10.0.0.100:8080}", f"serve: 10.0.0.100:8080, fingerprint: {fpr}}}"))
    _state_secrets(cluster)
    out = rendered(tmp_path / "out", cluster)
    assert sign.primary_fingerprints(out["cpu1"][KEYRING]) == [fpr]
    assert "/etc/apt/sources.list.d/grafana.list" not in out["db1"]  # the bundle's repository carries Grafana
    want, secret = deploy_files(cluster, monkeypatch, version=(24, 11))
    assert_same(out, want, secret)
    assert_no_secret(tmp_path / "out")


def test_the_hub_and_the_adopt_exemptions_are_rendered_as_apply_installs_them(tmp_path, monkeypatch):
    """Security review 3, N12: render left out the hub's files (its sudo rule, its unit's user) and
    identity.adopt_exempt_users; now each comes from the function apply installs it with."""
    spec = default_spec(user_key=KEY).replace(
        "    - {path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}\n",
        "    - {path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}\n"
        "    - {path: /sw, export: /srv/nfs/home}\n")
    spec += "software: {}\nworkbench:\n  jupyterhub: {}\nidentity:\n  adopt_exempt_users: [oncall]\n"
    cluster = _cluster(tmp_path, spec)
    _state_secrets(cluster)
    want, secret = deploy_files(cluster, monkeypatch)  # apply makes the hub's certificate: render copies it
    out = rendered(tmp_path / "out", cluster)
    d = Path(cluster.state_dir) / "secrets"
    values = [(d / n).read_bytes().strip() for n in ("jupyterhub-proxy-token", "jupyterhub-validate-token")]
    values.append((d / "ca" / "jupyterhub.key").read_bytes())
    cookie = (want["login1"]["/etc/corral/jupyterhub/cookie_secret"]).strip().encode()
    for node, files in want.items():
        assert set(out.get(node, {})) == set(files), (node, set(out.get(node, {})) ^ set(files))
        for path, content in files.items():
            theirs = content.encode() if isinstance(content, str) else content
            if (node, path) in secret:
                for value in (*values, cookie, MUNGE, DB_PW.encode()):
                    theirs = theirs.replace(value, b"SECRET")
                assert PLACEHOLDER.sub(b"SECRET", out[node][path]).strip() == theirs.strip(), (node, path)
            else:
                assert out[node][path] == theirs, (node, path)
    hub = out["login1"]
    assert b"User=corral-jupyterhub" in hub["/etc/systemd/system/corral-jupyterhub.service"]
    assert b"NOPASSWD: /usr/bin/sbatch, /usr/bin/scancel, /usr/bin/squeue" in hub["/etc/sudoers.d/corral-jupyterhub"]
    assert out["gpu01"]["/etc/security/corral-adopt.conf"].splitlines()[2] == b"+:root oncall:ALL"
    assert out["gpu01"]["/etc/cron.allow"] == b"root\noncall\n" == out["gpu01"]["/etc/at.allow"]
