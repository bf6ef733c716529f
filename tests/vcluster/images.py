"""Container images where the GPUs are (issue 37), run on tests/vcluster/test_workbench.py's cluster
(imported there as `reg`: ctl also the registry node, gpu01-02, login1, alice with her key; one cluster for
the workbench and the images, which share /sw) with `images: {podman: true, registry: {node: ctl,
cache: [...]}}` and the enroot and pyxis TEST stand-ins.

Debian's docker-registry serves the site registry over TLS with a certificate of corral's CA, which every
node trusts; an image made on the control host (busybox, tests/vcluster/oci_image.py) is pushed to it
trusting that CA alone. A Slurm batch job of alice's on a compute node pulls it through the registry with
rootless podman, runs it, and its output is in her home, hers. The registry runs as docker-registry,
its /metrics answer on the debug address and Prometheus scrapes them. A cache whose upstream is the site
registry (standing in for nvcr.io) gives a second node the image, and still gives it to a third with the
upstream stopped. `corral images pull` (the CLI, as a user runs it) makes a squashfs of an image on /sw
by a Slurm job, `images list` shows it with the registry's digest and its size, alice's job reads the
image's file out of it (unsquashfs) and runs from it (srun --container-image), `images rm` refuses while
her batch job names it and removes it after; a hostile reference changes nothing. A cache of an upstream
with credentials starts; its password is in its configuration file (0440 root:docker-registry) and nowhere
else: not in the journal, not in plan's output, not in any process's argv."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time

import pytest
from ruamel.yaml import YAML

from tests.vcluster.conftest import ssh
from tests.vcluster.oci_image import push
from tests.vcluster.standin import ENROOT, PYXIS, build_enroot_deb, build_pyxis_source
from tests.vcluster.test_users import as_alice

pytestmark = pytest.mark.vcluster

PASSWORD = "nvapi-Upstream-Pw-7Qz81"  # the cache's upstream password: must never leave its file
IMAGE = "corral/hello"
MAKERS = "imagemakers"  # images.registry.push_group
MAKER = "swmanager"  # its member (tests/vcluster/easybuild.py's software manager)
STANDINS = 18096  # the enroot and pyxis TEST stand-ins (tests/vcluster/standin.py), served on the bridge


def with_runtime(path, files, gateway: str) -> None:
    """enroot and pyxis (TEST stand-ins, served on the bridge from `files`) on the images cluster: alice's
    `srun --container-image=/sw/images/NAME.sqsh` goes through pyxis to enroot, which unpacks the file."""
    import hashlib
    deb, src = build_enroot_deb(files, "1.0.0"), build_pyxis_source(files, "1.0.0")
    sha = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (deb, src)}
    base = f"http://{gateway}:{STANDINS}"  # the control host's address on the bridge
    yaml = YAML()
    data = yaml.load(path.read_text())
    data["allow_http"] = True  # the stand-ins are served on the bridge (plain http, sha256-checked)
    data.setdefault("nvidia", {}).update({
        "enroot": {"version": "1.0.0", "packages": [ENROOT], "url": base + "/{package}_{version}_{arch}.deb",
                   "sha256": {ENROOT: sha[deb]}, "settings": {"ENROOT_MOUNT_HOME": "n"}},
        "pyxis": {"version": "1.0.0", "url": f"{base}/{PYXIS}-{{version}}.tar.gz", "sha256": sha[src],
                  "args": {"runtime_path": "/run/pyxis", "container_scope": "job"}}})
    with path.open("w") as f:
        yaml.dump(data, f)


def with_images(path) -> None:
    """The usable spec plus podman and a registry on ctl: the site registry and a cache with credentials
    whose upstream is that site registry (it plays nvcr.io: distribution's cache asks its upstream at
    start, and nothing outside answers here)."""
    creds = path.parent / "upstream-credentials"
    creds.write_text(f"$oauthtoken:{PASSWORD}\n")
    creds.chmod(0o600)
    yaml = YAML()
    data = yaml.load(path.read_text())
    data["images"] = {"podman": True, "registry": {"node": "ctl", "push_group": MAKERS, "cache": [
        {"upstream": "ctl:5000", "port": 5001, "credentials_file": creds.name}]}}
    # the image makers: the software manager (test_workbench.py adds it), with a key of its own to log in with
    from corral.virtual.keys import ensure_key, user_key_file
    key = ensure_key(user_key_file(path.parent / ".corral", MAKER), f"{MAKER}@test")
    data["groups"] = [*(data.get("groups") or []), {"name": MAKERS, "gid": 2600}]
    for user in data["users"]:
        if user["name"] == MAKER:
            user.update(groups=[MAKERS], ssh_keys=[key])
    # /sw on shared storage, where `corral images pull` puts squashfs images
    if not any(m["path"] == "/sw" for m in data["storage"]["mounts"]):
        data["storage"]["exports"].append({"path": "/srv/nfs/sw"})
        data["storage"]["mounts"].append({"path": "/sw", "export": "/srv/nfs/sw", "roles": ["compute", "login"]})
    with path.open("w") as f:
        yaml.dump(data, f)


def ctl_address(vc) -> str:
    return vc.node("ctl").node.address


def site_push(reg, tag: str, message: str) -> str:
    """IMAGE:tag pushed to the site registry from the control host as corral's loader pushes the bundle's images
    (its secret, a token from the registry's token server); its digest."""
    from corral.deploy.registry_auth import loader_secret
    from corral.render.registry_auth import LOADER
    ca = reg.cluster.state_dir / "secrets" / "ca" / "ca.pem"
    return push(f"https://{ctl_address(reg)}:5000", IMAGE, tag, ca, message,
                credentials=(LOADER, loader_secret(reg.cluster)), hosts={"ctl": ctl_address(reg)})


def as_maker(reg, node: str, command: str, check: bool = True, timeout: int = 180) -> subprocess.CompletedProcess:
    n = reg.node(node).node
    proc = subprocess.run(reg.ssh_cmd(n.address, command, user=MAKER), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{MAKER}@{node}: {command!r} rc={proc.returncode}: {proc.stdout} {proc.stderr}")
    return proc


def test_every_node_trusts_the_registry_and_it_runs_unprivileged(reg):
    """Every node's Python trusts the registry's certificate; the site registry asks for a token from corral's
    token server (401 naming it), which runs as its own user; the cache answers without one."""
    probe = ("python3 -c \"import urllib.request as u, urllib.error as e\ntry: u.urlopen('https://ctl:5000/v2/', "
             "timeout=10)\nexcept e.HTTPError as x: print(x.code, x.headers['WWW-Authenticate'])\"")
    for node in ("gpu01", "login1"):  # Python's ssl reads the trust store update-ca-certificates made
        out = ssh(reg, node, probe).stdout
        assert out.strip() == ('401 Bearer realm="https://ctl:5043/token",service="corral-registry"'), out
    for unit, user in (("docker-registry", "docker-registry"), ("corral-registry-cache-5001", "docker-registry"),
                       ("corral-registry-auth", "corral-registry-auth")):
        got = ssh(reg, "ctl", f"stat -c %U /proc/$(systemctl show -p MainPID --value {unit})").stdout.split()
        assert got == [user], (unit, got)
    key = ssh(reg, "ctl", "stat -c '%a %U %G' /etc/docker/registry/tls/registry.key").stdout.split()
    assert key == ["440", "root", "docker-registry"], key


def test_alice_runs_the_pushed_image_in_a_batch_job(reg):
    site_push(reg, "1", "hello from the site registry\n")
    script = ("#!/bin/bash\n#SBATCH -w gpu01 -o /home/alice/podman-%j.log\n"
              f"podman run --rm --network=none ctl:5000/{IMAGE}:1 sh -c 'cat /etc/message; id -u' "
              "> /home/alice/hello.out\n")
    # submitted as from a login session (pam_systemd's XDG_RUNTIME_DIR, which Slurm hands to the job): corral's
    # TaskProlog unsets it on gpu01, which lacks that directory (podman would fail on it)
    as_alice(reg, "login1", f"printf %s {shlex.quote(script)} > hello.sh && rm -f hello.out")
    job = as_alice(reg, "login1", "XDG_RUNTIME_DIR=/run/user/2001 sbatch --parsable --wait hello.sh", check=False,
                   timeout=240)
    log = ssh(reg, "ctl", "cat /srv/nfs/home/alice/podman-*.log", check=False).stdout
    assert job.returncode == 0, (job.stdout, job.stderr, log)
    out = ssh(reg, "ctl", "stat -c %U /srv/nfs/home/alice/hello.out && cat /srv/nfs/home/alice/hello.out").stdout
    assert out.splitlines() == ["alice", "hello from the site registry", "0"], (out, log)


def test_a_second_node_pulls_through_the_cache(reg):
    """podman on gpu02 asks the cache first for the upstream's images (registries.conf.d's mirror): the
    image lands in the cache's storage."""
    script = ("#!/bin/bash\n#SBATCH -w gpu02 -o /home/alice/cached-%j.log\n"
              f"podman run --rm --network=none ctl:5000/{IMAGE}:1 cat /etc/message > /home/alice/cached.out\n")
    as_alice(reg, "login1", f"printf %s {shlex.quote(script)} > cached.sh && rm -f cached.out")
    job = as_alice(reg, "login1", "sbatch --parsable --wait cached.sh", check=False, timeout=240)
    log = ssh(reg, "ctl", "cat /srv/nfs/home/alice/cached-*.log", check=False).stdout
    assert job.returncode == 0, (job.stdout, job.stderr, log)
    assert ssh(reg, "ctl", "cat /srv/nfs/home/alice/cached.out").stdout == "hello from the site registry\n"
    cached = ssh(reg, "ctl", f"ls /var/lib/docker-registry/cache-5001/docker/registry/v2/repositories/{IMAGE}").stdout
    assert "_manifests" in cached.split(), cached


def test_the_cache_serves_its_images_with_the_upstream_stopped(reg):
    """The upstream (the site registry) stopped: a node that never pulled the image still gets it, from the
    cache alone (distribution serves a tag it holds when its upstream does not answer)."""
    ssh(reg, "ctl", "systemctl stop docker-registry")
    try:
        out = as_alice(reg, "login1", f"podman run --rm --network=none ctl:5000/{IMAGE}:1 cat /etc/message",
                       check=False, timeout=120)
        assert out.returncode == 0 and out.stdout == "hello from the site registry\n", (out.stdout, out.stderr)
        logs = ssh(reg, "ctl", "journalctl -u corral-registry-cache-5001 --no-pager -n 200").stdout
        assert f"/v2/{IMAGE}/manifests/1" in logs, logs[-2000:]
        assert upstream_probe(reg) == "0"  # what RegistryUpstreamUnreachable reads
    finally:
        ssh(reg, "ctl", "systemctl start docker-registry")
    assert upstream_probe(reg) == "1"


DELETE = r"""
import base64, json, re, subprocess, sys, urllib.error, urllib.parse, urllib.request
base, name = sys.argv[1], sys.argv[2]
accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
# her own MUNGE credential for the registry, as podman's helper would give it, shown to the token server
cred = subprocess.run(["/usr/local/bin/docker-credential-corral", "get"], input="ctl:5000", capture_output=True,
                      text=True).stdout
auth = json.loads(cred) if cred.startswith("{") else None

def call(method, url):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, method=method, headers={"Accept": accept}),
                                      timeout=30)
    except urllib.error.HTTPError as exc:
        if exc.code != 401:
            return exc
        p = dict(re.findall(r'(\w+)="([^"]*)"', exc.headers["WWW-Authenticate"]))
        q = urllib.parse.urlencode({"service": p["service"], "scope": p.get("scope", "")})
        h = {"Authorization": "Basic " + base64.b64encode(f"munge:{auth['Secret']}".encode()).decode()} if auth else {}
        token = json.loads(urllib.request.urlopen(urllib.request.Request(f"{p['realm']}?{q}", headers=h),
                                                  timeout=30).read())["token"]
        req = urllib.request.Request(url, method=method, headers={"Accept": accept, "Authorization": f"Bearer {token}"})
        try:
            return urllib.request.urlopen(req, timeout=30)
        except urllib.error.HTTPError as again:
            return again

digest = call("HEAD", f"{base}/v2/{name}/manifests/1").headers["Docker-Content-Digest"]
print(json.dumps({"digest": digest, "delete": call("DELETE", f"{base}/v2/{name}/manifests/{digest}").status,
                  "credential": auth is not None}))
"""


@pytest.mark.attack
def test_she_cannot_delete_an_image_from_the_site_registry(reg):
    """Security review 3, N5 (deletes): from login1, alice asks the site registry to delete the image others run,
    with a token for her own MUNGE credential; the token allows no delete (401) and the image still pulls."""
    as_alice(reg, "login1", f"printf '%s' {shlex.quote(DELETE)} > ~/.delete.py")
    try:
        got = json.loads(as_alice(reg, "login1", f"python3 ~/.delete.py https://ctl:5000 {IMAGE}").stdout)
    finally:
        as_alice(reg, "login1", "rm -f ~/.delete.py", check=False)
    assert got["digest"].startswith("sha256:") and got["delete"] == 401 and got["credential"], got
    out = as_alice(reg, "login1", f"podman run --rm --network=none ctl:5000/{IMAGE}:1 cat /etc/message", timeout=120)
    assert out.stdout == "hello from the site registry\n"


def _token(reg, user: str, secret_cmd: str) -> tuple[str, list | None]:
    """What corral's token server answers alice on login1 for a push token to team/tool, with the credential
    `secret_cmd` prints (her shell makes it): the HTTP status and the token's actions."""
    import base64
    cmd = (f"curl -sS -w '\\n%{{http_code}}' -u \"{user}:$({secret_cmd})\" "
           "'https://ctl:5043/token?service=corral-registry&scope=repository:team/tool:pull,push'")
    body, _, code = as_alice(reg, "login1", cmd).stdout.strip().rpartition("\n")
    if code != "200":
        return code, None
    claims = json.loads(body)["token"].split(".")[1]
    return code, json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["access"][0]["actions"]


@pytest.mark.attack
def test_only_the_push_group_pushes_and_never_over_the_loaders_images(reg):
    """Security review 3, N5 (pushes): the image maker (a member of push_group) pushes her own image with podman from
    login1, as herself (corral's credential helper gives podman her MUNGE credential), and alice runs it. alice, not
    a member, can push neither a new repository nor over the maker's; the maker cannot push into a repository
    corral's loader wrote (the bundle's images). Straight at the token server: a wrong loader secret is refused, a
    MUNGE credential minted for something else gets what anyone gets (pull), hers gives her pull alone."""
    import ssl

    from corral.bundle.image_push import Registry
    tag = f"podman tag ctl:5000/{IMAGE}:1"
    as_maker(reg, "login1", f"podman pull -q ctl:5000/{IMAGE}:1 >/dev/null && {tag} ctl:5000/team/tool:1 && "
                            "podman push -q ctl:5000/team/tool:1", timeout=240)
    ca = reg.cluster.state_dir / "secrets" / "ca" / "ca.pem"
    anonymous = Registry(f"https://{ctl_address(reg)}:5000", ssl.create_default_context(cafile=str(ca)),
                         hosts={"ctl": ctl_address(reg)})
    media = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
    hers = anonymous.digest("team/tool", "1", media)
    assert hers and hers.startswith("sha256:")
    out = as_alice(reg, "login1", "podman run --rm --network=none ctl:5000/team/tool:1 cat /etc/message", timeout=120)
    assert out.stdout == "hello from the site registry\n"
    for target in ("alice/mine:1", "team/tool:1"):
        got = as_alice(reg, "login1", f"{tag} ctl:5000/{target} && podman push ctl:5000/{target}", check=False,
                       timeout=120)
        assert got.returncode != 0 and "denied" in got.stderr, (target, got.stderr[-1000:])
    got = as_maker(reg, "login1", f"{tag} ctl:5000/{IMAGE}:evil && podman push ctl:5000/{IMAGE}:evil", check=False,
                   timeout=120)
    assert got.returncode != 0 and "denied" in got.stderr, got.stderr[-1000:]
    assert anonymous.digest(IMAGE, "evil", media) is None and anonymous.digest("alice/mine", "1", media) is None
    assert anonymous.digest("team/tool", "1", media) == hers  # the maker's, untouched by alice
    assert _token(reg, "corral-loader", "echo guess") == ("401", None)
    assert _token(reg, "munge", "munge -n") == ("200", ["pull"])
    assert _token(reg, "munge", "echo ctl:5000 | docker-credential-corral get | python3 -c "
                                "'import json,sys; print(json.load(sys.stdin)[\"Secret\"])'") == ("200", ["pull"])


@pytest.mark.attack
def test_her_podman_storage_is_hers_and_nobody_can_make_another_users_first(reg):
    """Security review 3, N6: her image store on login1 is in the directory the login hook made for her (root's
    parent, 0711), not in /var/tmp where another user could have made it first; she cannot make anyone else's."""
    root = as_alice(reg, "login1", "podman info --format '{{.Store.GraphRoot}}'").stdout.strip()
    assert root == "/var/lib/corral-podman/2001/storage", root
    modes = ssh(reg, "login1", "stat -c '%a %U' /var/lib/corral-podman /var/lib/corral-podman/2001").stdout.split("\n")
    assert modes[:2] == ["711 root", "700 alice"], modes
    squat = as_alice(reg, "login1", "mkdir /var/lib/corral-podman/3001", check=False)  # bob's uid
    assert squat.returncode != 0 and "Permission denied" in squat.stderr, (squat.returncode, squat.stderr)


def upstream_probe(reg) -> str:
    """Run the registry node's probe of the caches' upstreams now (its timer runs it every minute): the value
    it wrote for the cache of ctl:5000 in node-exporter's textfile directory."""
    ssh(reg, "ctl", "systemctl start corral-registry-upstreams.service")
    text = ssh(reg, "ctl", "cat /var/lib/prometheus/node-exporter/corral-registry-upstreams.prom").stdout
    found = re.search(r'^corral_registry_upstream_up\{registry="ctl:5000"\} (\d)$', text, re.M)
    assert found, text
    return found.group(1)


def test_registry_metrics_are_scraped(reg):
    addr = ctl_address(reg)
    metrics = ssh(reg, "ctl", f"curl -fsS http://{addr}:5051/metrics").stdout
    assert re.search(r"^registry_\w+", metrics, re.M), metrics[:500]  # distribution's own series
    deadline = time.monotonic() + 60
    while True:
        targets = json.loads(ssh(reg, "ctl", f"curl -fsS http://{addr}:9090/api/v1/targets").stdout)
        mine = [t for t in targets["data"]["activeTargets"] if t["labels"].get("job") == "registry"]
        if {t["labels"]["registry"]: t["health"] for t in mine}.get("site") == "up" or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {t["labels"]["registry"] for t in mine} == {"site", "ctl:5000"}, mine
    assert [t["health"] for t in mine if t["labels"]["registry"] == "site"] == ["up"], mine
    # the upstreams' probe reaches Prometheus through node-exporter's textfile collector, and the alert reading it
    # is loaded
    rules = json.loads(ssh(reg, "ctl", f"curl -fsS http://{addr}:9090/api/v1/rules").stdout)
    assert "RegistryUpstreamUnreachable" in [r["name"] for g in rules["data"]["groups"] for r in g["rules"]], rules
    query = "curl -fsS -G --data-urlencode query=corral_registry_upstream_up http://%s:9090/api/v1/query" % addr
    deadline = time.monotonic() + 60
    while True:  # until Prometheus has scraped the probe's last value: the module's test before stopped the upstream
        got = json.loads(ssh(reg, "ctl", query).stdout)["data"]["result"]
        if [r["value"][1] for r in got] == ["1"] or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert [(r["metric"]["registry"], r["metric"]["node"], r["value"][1]) for r in got] == [("ctl:5000", "ctl", "1")], got


def test_the_upstream_password_stays_in_its_file(reg):
    conf = ssh(reg, "ctl", "stat -c '%a %U %G' /etc/docker/registry/cache-5001.yml && "
                           "grep -c " + shlex.quote(PASSWORD) + " /etc/docker/registry/cache-5001.yml").stdout.split()
    assert conf == ["440", "root", "docker-registry", "1"], conf
    active = ssh(reg, "ctl", "systemctl is-active corral-registry-cache-5001").stdout.strip()
    assert active == "active", active
    argv = ssh(reg, "ctl", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
    assert "cache-5001.yml" in argv and PASSWORD not in argv
    plan = subprocess.run([sys.executable, "-m", "corral", "plan", "-f", str(reg.cluster.path)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert plan.returncode == 0 and PASSWORD not in plan.stdout + plan.stderr, plan.stderr[-2000:]
    db = sqlite3.connect(reg.cluster.state_dir / "journal.sqlite")
    dump = "\n".join(db.iterdump())
    assert "test-workbench-apply" in dump and PASSWORD not in dump


def corral(reg, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "corral", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1", "CORRAL_SPEC": str(reg.cluster.path)})


def test_images_pull_list_a_job_reads_it_rm(reg):
    digest = site_push(reg, "2", "read out of the squashfs\n")
    pulled = corral(reg, "images", "pull", f"ctl:5000/{IMAGE}:2", "--to", "/sw/images", "--json", timeout=400)
    got = json.loads(pulled.stdout)
    assert pulled.returncode == 0 and got["ok"], (got, pulled.stderr[-2000:])
    name, path = "corral+hello+2", "/sw/images/corral+hello+2.sqsh"
    assert got["path"] == path and got["digest"] == digest, got
    on_disk = ssh(reg, "login1", f"stat -c '%s %U %a' {path} && ls -A /sw/images/.incoming").stdout.split()
    assert on_disk == [str(got["size"]), "root", "644"], on_disk  # nothing left in .incoming
    listed = json.loads(corral(reg, "images", "list", "--to", "/sw/images", "--json").stdout)
    assert listed["ok"] and [(i["name"], i["ref"], i["digest"], i["size"], i["problem"]) for i in listed["images"]] \
        == [(name, f"ctl:5000/{IMAGE}:2", digest, got["size"], None)], listed
    # alice's job on a compute node reads the image's own file out of the squashfs
    job = as_alice(reg, "login1", f"srun -w gpu02 unsquashfs -cat {path} etc/message", check=False, timeout=120)
    assert job.returncode == 0 and job.stdout == "read out of the squashfs\n", (job.stdout, job.stderr)
    a_job_runs_from_the_image(reg, path)
    hostile = corral(reg, "images", "pull", "ctl:5000/x;touch /tmp/pwned", "--to", "/sw/images", "--json")
    assert hostile.returncode == 2 and "';'" in json.loads(hostile.stdout)["error"], hostile.stdout
    assert sorted(ssh(reg, "login1", "ls -A /sw/images; test ! -e /tmp/pwned && echo clean").stdout.split()) == [
        ".incoming", "clean", f"{name}.json", f"{name}.sqsh"]
    # a job that names the image holds it: rm refuses, names the job, removes nothing
    job_id = as_alice(reg, "login1", f"sbatch --parsable -w gpu01 --wrap 'unsquashfs -cat {path} etc/message; "
                                     "sleep 120'").stdout.strip()
    refused = corral(reg, "images", "rm", name, "--to", "/sw/images", "--json")
    assert refused.returncode == 1 and f"{job_id}|script" in json.loads(refused.stdout)["used_by"], refused.stdout
    assert ssh(reg, "login1", f"test -f {path} && test -f /sw/images/{name}.json").returncode == 0
    as_alice(reg, "login1", f"scancel {job_id}; for _ in $(seq 30); do squeue -h -t PD,R,CF,S -j {job_id} "
                            "2>/dev/null | grep -q . || break; sleep 1; done")
    removed = corral(reg, "images", "rm", name, "--to", "/sw/images", "--json")
    assert removed.returncode == 0 and json.loads(removed.stdout)["ok"], removed.stdout
    after = json.loads(corral(reg, "images", "list", "--to", "/sw/images", "--json").stdout)
    assert after["ok"] and after["images"] == [], after


def a_job_runs_from_the_image(reg, path: str) -> None:
    """alice's `srun --container-image=FILE.sqsh CMD` (pyxis, then enroot: TEST stand-ins) runs CMD with the
    image's files as its root: /etc/message exists only in the image; a corrupt or missing file fails the step
    with enroot's error."""
    assert as_alice(reg, "login1", "srun -w gpu02 /bin/cat /etc/message", check=False).returncode != 0  # not the host's
    job = as_alice(reg, "login1", f"srun -w gpu02 --container-image={path} /bin/cat /etc/message", check=False,
                   timeout=120)
    assert job.returncode == 0 and job.stdout == "read out of the squashfs\n", (job.stdout, job.stderr)
    # corral's job environment reaches the task in the container (its SPANK plugin: a TaskProlog would run in
    # there, which Slurm 24.11+ cannot start), a value alice sets stays hers
    config = ssh(reg, "ctl", "scontrol show config").stdout
    assert re.search(r"^TaskProlog\s*=\s*\(null\)$", config, re.M), [l for l in config.splitlines() if "Prolog" in l]
    want = next(line.split("=", 1)[1] for line in ssh(reg, "gpu02", "cat /etc/corral/job-env").stdout.splitlines()
                if line.startswith("NCCL_SOCKET_IFNAME="))
    env = as_alice(reg, "login1", f"srun -w gpu02 --container-image={path} /bin/sh -c 'echo \"$NCCL_SOCKET_IFNAME\"'; "
                                  f"NCCL_SOCKET_IFNAME=hers srun -w gpu02 --container-image={path} "
                                  "/bin/sh -c 'echo \"$NCCL_SOCKET_IFNAME\"'", timeout=120)
    assert env.stdout.splitlines() == [want, "hers"], (env.stdout, env.stderr)
    as_alice(reg, "login1", "head -c 8192 /dev/urandom > corrupt.sqsh")
    for image, error in (("/home/alice/corrupt.sqsh", "cannot read the squashfs image /home/alice/corrupt.sqsh"),
                         ("/sw/images/missing.sqsh", "No such file or directory: /sw/images/missing.sqsh")):
        bad = as_alice(reg, "login1", f"srun -w gpu02 --container-image={image} /bin/cat /etc/message", check=False,
                       timeout=120)
        assert bad.returncode != 0 and error in bad.stderr and not bad.stdout, (image, bad.stdout, bad.stderr)
