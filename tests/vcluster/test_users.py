"""A cluster people can use, end to end as the default `corral up` cluster is: ctl (also the NFS node),
gpu01-02, login1, /home shared from the NFS node (the NAS emulated by a bind mount), the example user
alice with her own key. Everything here runs as alice from login1 over SSH with her key: batch GPU
jobs whose output lands in her home, a 2-node job writing into a shared directory, submitit from
PyPI through the control host's cache, pam_slurm_adopt on a compute node. Then health drains a node
that lost /home, removing alice locks her out (home kept, associations gone), and the second apply
changes nothing."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time

import pytest

from corral.checks.validate import validate
from corral.spec.loader import load
from corral.spec.releases import release
from corral.workflows.converge import converge
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
SUBMITIT = "submitit==1.5.4"  # 1.5.2 imports pkg_resources, which a Python 3.13 venv lacks


@pytest.fixture(scope="module")
def usable(usable_cluster, request):
    """The usable cluster (tests/vcluster/conftest.py, shared with test_security_identity and
    test_security_root), converged to its spec for this module."""
    settled(usable_cluster, f"test-{request.module.__name__.rsplit('.', 1)[-1]}-apply")
    return usable_cluster


def as_alice(vc, node: str, command: str, check: bool = True, timeout: int = 180) -> subprocess.CompletedProcess:
    n = vc.node(node).node
    proc = subprocess.run(vc.ssh_cmd(n.address, command, user="alice"), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"alice@{node}: {command!r} rc={proc.returncode}: {proc.stdout} {proc.stderr}")
    return proc


def sacct(vc, job: str, fields: str) -> str:
    for _ in range(60):  # slurmdbd records a job shortly after it ends
        rec = ssh(vc, "ctl", f"sacct -n -X -P -j {job} -o {fields}").stdout.strip()
        if rec and not rec.startswith(("RUNNING", "PENDING")):
            return rec
        time.sleep(0.5)
    return rec


def test_alice_is_the_same_everywhere_and_her_home_is_shared(usable):
    for node in ("ctl", "gpu01", "gpu02", "login1"):
        assert ssh(usable, node, "getent passwd alice").stdout.split(":")[2:4] == ["2001", "2001"], node
    stat = ssh(usable, "login1", "stat -c '%U %a' /home/alice").stdout.split()
    assert stat == ["alice", "700"]
    ssh(usable, "gpu01", "runuser -u alice -- sh -c 'echo shared > /home/alice/written-on-gpu01'")
    assert as_alice(usable, "login1", "cat ~/written-on-gpu01").stdout == "shared\n"


def test_gpu_batch_job_output_lands_in_her_home_on_login1(usable):
    job = as_alice(usable, "login1", "cd ~ && sbatch --parsable --wait -w gpu01 --gres=gpu:2 --output=%x-%j.out "
                                     "-J gpujob --wrap 'hostname; echo $CUDA_VISIBLE_DEVICES; id -un'").stdout.strip()
    assert job.isdigit(), job
    out = as_alice(usable, "login1", f"stat -c %U ~/gpujob-{job}.out && cat ~/gpujob-{job}.out").stdout.split()
    assert out == ["alice", "gpu01", "0,1", "alice"]
    assert sacct(usable, job, "State,User,Account") == "COMPLETED|alice|research"


def test_two_node_job_writes_one_file_per_node_into_a_shared_directory(usable):
    as_alice(usable, "login1", "mkdir -p ~/shared && rm -f ~/shared/*")
    step = shlex.quote('echo "$SLURM_JOB_ID" > "$HOME/shared/$(hostname).txt"')
    job = as_alice(usable, "login1", f"cd ~ && sbatch --parsable --wait -N2 --output=/dev/null "
                                     f"--wrap {shlex.quote(f'srun -N2 sh -c {step}')}").stdout.strip()
    listing = as_alice(usable, "login1", "cd ~/shared && for f in *.txt; do echo $f $(cat $f); done").stdout
    assert sorted(listing.splitlines()) == [f"gpu01.txt {job}", f"gpu02.txt {job}"]


def test_her_tasks_get_the_fabric_environment(usable):
    """corral's TaskProlog runs as the job's user (alice, from login1): each task gets NCCL_SOCKET_IFNAME for
    its own node (render/job_env.py), as root's jobs do (test_slurm.py)."""
    want = {}
    for node in ("gpu01", "gpu02"):
        address = usable.cluster.node(node).address
        iface = ssh(usable, node, f"ip -o -4 addr show | awk '$4 ~ /^{address}\\// {{print $2}}'").stdout.strip()
        want[node] = "=" + iface
    out = as_alice(usable, "login1", "srun -N2 -t 2 bash -c 'echo $(hostname) $(id -un) $NCCL_SOCKET_IFNAME'").stdout
    got = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert got == {n: ["alice", v] for n, v in want.items()} and "=" not in want.values(), out


def test_submitit_from_pypi_returns_a_result_through_the_shared_home(usable):
    """submitit (PyPI), downloaded by the control host into the repository the nodes reach, installed
    by alice into a venv in her home on login1; her function runs on a compute node (the venv's
    Python, reached through /home) and the result comes back through the shared filesystem."""
    usable.add_wheels([SUBMITIT])
    url = f"{usable.repo_url()}wheels/"
    host = url.split("/")[2].split(":")[0]  # plain http on the private bridge: pip wants it named
    as_alice(usable, "login1", f"python3 -m venv ~/venv && ~/venv/bin/pip install -q --no-index "
                               f"--trusted-host {host} --find-links {url} {SUBMITIT}", timeout=300)
    script = """
import socket, submitit
ex = submitit.AutoExecutor(folder="~/submitit-logs")
ex.update_parameters(timeout_min=5, slurm_partition="gpu", gpus_per_node=1)
job = ex.submit(lambda a, b: (a + b, socket.gethostname()), 2, 3)
print(job.job_id, *job.result())
"""
    out = as_alice(usable, "login1", f"~/venv/bin/python -c {shlex.quote(script)}", timeout=300).stdout.split()
    job, total, host = out[-3:]
    assert total == "5" and host in ("gpu01", "gpu02")
    assert sacct(usable, job, "User,Account").split("\n")[0] == "alice|research"


def test_ssh_to_a_compute_node_only_with_a_job_there_and_inside_it(usable):
    denied = as_alice(usable, "gpu02", "true", check=False)
    assert denied.returncode != 0, denied
    log = ssh(usable, "gpu02", "journalctl -q --no-pager -n 50 | grep pam_slurm_adopt", check=False).stdout
    assert "no active jobs" in log, log  # refused by pam_slurm_adopt (the same key works below, with a job)
    job = as_alice(usable, "login1", "sbatch --parsable -w gpu02 -t 5 --output=/dev/null --wrap 'sleep 120'").stdout.strip()
    try:
        for _ in range(60):
            if ssh(usable, "ctl", f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING":
                break
            time.sleep(0.5)
        cgroup = as_alice(usable, "gpu02", "cat /proc/self/cgroup").stdout
        assert re.search(rf"job_{job}/step_extern", cgroup), cgroup
    finally:
        ssh(usable, "ctl", f"scancel {job}", check=False)


def test_validate_runs_a_job_as_a_user(usable):
    report = validate(usable.cluster)
    checks = {c.name: c for c in report.checks}
    assert report.ok, [(c.name, c.status, c.message) for c in report.checks]
    assert checks["user job"].status == "OK" and "ran on gpu0" in checks["user job"].message


def test_virtual_ssh_passes_arguments_as_words(usable):
    cmd = [sys.executable, "-m", "corral", "virtual", "ssh", "--dir", str(usable.workdir), "login1", "--user",
           "alice", "--", "sh", "-c", 'printf "%s|" "$@"', "x", "a b", "$HOME", "it's"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (proc.returncode, proc.stdout) == (0, "a b|$HOME|it's|"), proc.stderr


def test_health_drains_a_node_that_lost_home_and_resumes_it(usable):
    keep = "mount --bind /home /run/corral-test-home && umount /home"
    back = "mount --bind /run/corral-test-home /home && umount /run/corral-test-home"
    ssh(usable, "gpu02", f"mkdir -p /run/corral-test-home && {keep}")
    try:
        ssh(usable, "gpu02", "/usr/local/sbin/corral-health --slurm", check=False)
        reason = ssh(usable, "ctl", "sinfo -h -n gpu02 -o '%T|%E'").stdout.strip()
        assert reason.split("|")[0] in ("drained", "draining") and reason.split("|")[1] == "corral: /home not mounted"
    finally:
        ssh(usable, "gpu02", back)
    assert ssh(usable, "gpu02", "systemctl is-active slurmd").stdout.strip() == "active"  # never stopped
    ssh(usable, "gpu02", "/usr/local/sbin/corral-health --slurm", check=False)
    for _ in range(60):  # right after the resume sinfo may show idle* until slurmd's next contact
        state = ssh(usable, "ctl", "sinfo -h -n gpu02 -o %T").stdout.strip()
        if state == "idle":
            break
        time.sleep(0.5)
    assert state == "idle"


REST_PORT = 6820


def _rest(vc, node: str, user: str | None, token: str | None, method: str, path: str,
          body: str | None = None) -> tuple[int, dict]:
    """curl as alice on `node` to slurmrestd on ctl: (HTTP status, or curl's exit code as -N; the JSON answer)."""
    ctl = vc.node("ctl").node.address
    headers = ([f"-H X-SLURM-USER-NAME:{user}"] if user else []) + ([f"-H X-SLURM-USER-TOKEN:{token}"] if token else [])
    data = ["-H", "Content-Type:application/json", "--data-binary", body] if body is not None else []
    cmd = ["curl", "-sS", "-m", "10", "-o", "/tmp/rest.out", "-w", "%{http_code}", "-X", method,
           *[w for h in headers for w in h.split(" ", 1)], *data, f"http://{ctl}:{REST_PORT}{path}"]
    line = shlex.join(cmd) + "; rc=$?; echo; echo rc=$rc; cat /tmp/rest.out 2>/dev/null; rm -f /tmp/rest.out"
    out = as_alice(vc, node, line, check=False).stdout
    code, rc, *rest = out.split("\n", 2) + ["", ""]
    if rc.strip() != "rc=0":
        return -int(rc.strip().removeprefix("rc=") or 1), {}
    try:
        return int(code), json.loads(rest[0] or "{}")
    except json.JSONDecodeError:
        return int(code), {"text": rest[0]}


@pytest.mark.attack
def test_alice_submits_and_queries_a_job_through_the_rest_api_with_her_own_token(usable):
    """slurm.rest: alice gets a token on login1 (`scontrol token`) and submits and queries a job with curl; no token,
    an expired token of root's, root's name with her token, and a node that is not a client are all refused."""
    vc = usable
    unit = ssh(vc, "ctl", "systemctl show -p ActiveState -p User slurmrestd; stat -c '%a %U %G %s' "
                          "/etc/slurm/jwt_hs256.key").stdout.split()
    assert sorted(unit[:2]) == ["ActiveState=active", "User=corral-slurmrestd"], unit
    assert unit[2:] == ["600", "slurm", "slurm", "32"], unit  # the JWT key: 32 bytes, slurmctld's alone
    token = as_alice(vc, "login1", "scontrol token").stdout.strip().removeprefix("SLURM_JWT=")
    assert token.count(".") == 2, token
    code, spec = _rest(vc, "login1", "alice", token, "GET", "/openapi/v3")
    assert code == 200, (code, spec)
    version = max(p.split("/")[2] for p in spec["paths"] if re.fullmatch(r"/slurm/v0\.0\.\d+/job/submit", p))
    job = {"job": {"script": "#!/bin/bash\nhostname\n", "name": "via-rest", "current_working_directory": "/home/alice",
                   "environment": ["PATH=/usr/bin:/bin"], "time_limit": {"set": True, "number": 5}}}
    code, submitted = _rest(vc, "login1", "alice", token, "POST", f"/slurm/{version}/job/submit", json.dumps(job))
    assert code == 200 and submitted.get("job_id"), (code, submitted)
    job_id = submitted["job_id"]
    for _ in range(60):
        code, got = _rest(vc, "login1", "alice", token, "GET", f"/slurm/{version}/job/{job_id}")
        assert code == 200, (code, got)
        (rec,) = got["jobs"]
        if "COMPLETED" in rec["job_state"]:
            break
        time.sleep(0.5)
    assert rec["user_name"] == "alice" and rec["name"] == "via-rest" and "COMPLETED" in rec["job_state"], rec
    assert as_alice(vc, "login1", f"squeue -h -j {job_id} -o %u; sacct -n -X -j {job_id} -o user%20").stdout.split()[-1] \
        == "alice"
    # refused: no token (401); root's own token once expired, her token under root's name (slurmctld refuses the
    # credential: slurmrestd answers 511, Network Authentication Required); never a job list
    assert _rest(vc, "login1", None, None, "GET", f"/slurm/{version}/jobs")[0] == 401
    expired = ssh(vc, "ctl", "scontrol token username=root lifespan=1").stdout.strip().removeprefix("SLURM_JWT=")
    time.sleep(2.5)
    for user, bad in (("root", expired), ("root", token)):
        code, body = _rest(vc, "login1", user, bad, "GET", f"/slurm/{version}/jobs")
        assert code in (401, 403, 511) and not body.get("jobs"), (user, code, body)
    assert _rest(vc, "login1", "alice", token, "GET", f"/slurm/{version}/jobs")[0] == 200  # hers still works
    ctl = vc.node("ctl").node.address
    probe = (f"python3 -c \"import socket; s = socket.create_connection(('{ctl}', {REST_PORT}), 5); "
             "s.sendall(b'GET /openapi/v3 HTTP/1.0\\r\\n\\r\\n'); print(s.recv(64))\"")
    refused = ssh(vc, "gpu01", probe, check=False)  # a compute node is no client: reset by the table, before HTTP
    assert refused.returncode != 0 and ("ConnectionRefused" in refused.stderr or "ConnectionReset" in refused.stderr), (
        refused.stdout, refused.stderr)


def test_second_apply_changes_nothing(usable):
    result = converge(usable.cluster, "apply", command="test-users-reapply")
    assert result.ok and result.changed == 0, [
        (n.name, o.name) for n in result.nodes.values() for o in n.ops if o.status == "changed"]


LDAP_PW = "corral-test-ldap"  # the test directory's admin password (a throwaway slapd on ctl)
LDIF = """dn: ou=people,dc=corral,dc=test
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=corral,dc=test
objectClass: organizationalUnit
ou: groups

dn: cn=bob,ou=groups,dc=corral,dc=test
objectClass: posixGroup
cn: bob
gidNumber: 3001

dn: uid=bob,ou=people,dc=corral,dc=test
objectClass: inetOrgPerson
objectClass: posixAccount
uid: bob
cn: Bob Directory
sn: Directory
uidNumber: 3001
gidNumber: 3001
homeDirectory: /home/bob
loginShell: /bin/bash
"""


def _tls_files(directory, address: str) -> dict[str, str]:
    """A CA and slapd's certificate for the controller's address, made with openssl on this host."""
    run = lambda *a: subprocess.run(a, check=True, capture_output=True, cwd=directory)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
        "-subj", "/CN=corral test CA",
        "-keyout", "ca.key", "-out", "ca.pem")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", f"/CN={address}", "-keyout", "server.key", "-out", "server.csr")
    (directory / "san.ext").write_text(f"subjectAltName=IP:{address}\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "san.ext", "-out", "server.pem")
    return {name: (directory / name).read_text() for name in ("ca.pem", "server.pem", "server.key")}


def _slapd_on_ctl(vc, tls: dict[str, str]) -> None:
    """A real OpenLDAP (Debian's slapd) on ctl, serving ldaps:// with the test CA's certificate (a slapd
    already there takes the new certificate)."""
    vc.add_packages(["slapd", "ldap-utils"])
    seed = "\n".join(f"slapd {k}" for k in (
        "slapd/domain string corral.test", "shared/organization string corral",
        f"slapd/password1 password {LDAP_PW}", f"slapd/password2 password {LDAP_PW}"))
    ssh(vc, "ctl", f"echo {shlex.quote(seed)} | debconf-set-selections && apt-get update -q >/dev/null && "
                   "DEBIAN_FRONTEND=noninteractive apt-get install -y -q slapd ldap-utils >/dev/null")
    for name, text in tls.items():
        ssh(vc, "ctl", f"mkdir -p /etc/ldap/tls && printf %s {shlex.quote(text)} > /etc/ldap/tls/{name}")
    ssh(vc, "ctl", "chown -R openldap:openldap /etc/ldap/tls && chmod 0600 /etc/ldap/tls/server.key")
    change = ("dn: cn=config\nchangetype: modify\nreplace: olcTLSCACertificateFile\n"
              "olcTLSCACertificateFile: /etc/ldap/tls/ca.pem\n-\nreplace: olcTLSCertificateFile\n"
              "olcTLSCertificateFile: /etc/ldap/tls/server.pem\n-\nreplace: olcTLSCertificateKeyFile\n"
              "olcTLSCertificateKeyFile: /etc/ldap/tls/server.key\n")
    ssh(vc, "ctl", f"printf %s {shlex.quote(change)} | ldapmodify -Q -Y EXTERNAL -H ldapi:///")
    ssh(vc, "ctl", "sed -i 's|^SLAPD_SERVICES=.*|SLAPD_SERVICES=\"ldap:/// ldapi:/// ldaps:///\"|' "
                   "/etc/default/slapd && systemctl restart slapd")
    # the directory's entries, once (the usable cluster's second module to get a directory finds them)
    bind = f"-x -H ldap://127.0.0.1 -D cn=admin,dc=corral,dc=test -w {LDAP_PW}"
    ssh(vc, "ctl", f"ldapsearch {bind} -b ou=people,dc=corral,dc=test -s base dn >/dev/null 2>&1 || "
                   f"printf %s {shlex.quote(LDIF)} | ldapadd {bind} >/dev/null")


def test_ldap_users_resolve_on_every_node_and_their_jobs_run_as_them(usable, tmp_path):
    """identity.ldap: SSSD on every node reads a real slapd (on ctl, ldaps://, the test CA, a bind DN
    whose password is a file on this host); bob, who exists only in the directory, resolves everywhere
    and his job runs as bob. The bind password appears in no plan output."""
    ctl_address = usable.node("ctl").node.address
    tls = _tls_files(tmp_path, ctl_address)
    _slapd_on_ctl(usable, tls)
    spec = usable.cluster.path
    text = spec.read_text()
    (spec.parent / "ldap-ca.pem").write_text(tls["ca.pem"])
    (spec.parent / "ldap-bind").write_text(LDAP_PW + "\n")
    (spec.parent / "ldap-bind").chmod(0o600)
    ldap = (f"identity:\n  ldap:\n    uri: [ldaps://{ctl_address}]\n    base: dc=corral,dc=test\n"
            "    ca_cert: ldap-ca.pem\n    bind_dn: cn=admin,dc=corral,dc=test\n    bind_password_file: ldap-bind\n"
            "    min_id: 3000\n")  # bob's uid 3001 is below the default floor (10000)
    spec.write_text(text.replace("slurm:\n", ldap + "slurm:\n", 1)
                    .replace("users: [root]", "users: [root, bob]"))
    try:
        cluster = load(spec)
        from corral.virtual.cluster import VirtualCluster
        VirtualCluster(cluster).up()  # as a user does after editing the spec: SSSD's packages into the repository
        plan = converge(cluster, "plan", command="test-ldap-plan")
        assert LDAP_PW not in json.dumps(plan.to_json())
        result = converge(cluster, "apply", command="test-ldap-apply")
        assert result.ok, json.dumps(result.to_json(), indent=1)[:6000]
        assert LDAP_PW not in json.dumps(result.to_json())
        for node in ("ctl", "gpu01", "gpu02", "login1"):
            assert ssh(usable, node, "getent passwd bob").stdout.split(":")[2:4] == ["3001", "3001"], node
        mode = release(usable.os).sssd_conf_mode  # 0600; trixie's sssd.service makes it 0640 at each start
        assert ssh(usable, "ctl", "stat -c '%a %U %G' /etc/sssd/sssd.conf").stdout.split() == [mode, "root", "root"]
        out = ssh(usable, "login1", "cd / && runuser -u bob -- srun -N1 -w gpu01 -t 2 id -un").stdout.strip()
        assert out == "bob"
    finally:
        spec.write_text(text)


def test_removing_alice_locks_her_out_keeps_her_home_and_drops_her_associations(usable):
    spec = usable.cluster.path
    text = spec.read_text()
    spec.write_text(re.sub(r"users:\n(  .*\n|    .*\n)+", "", text))
    try:
        cluster = load(spec)
        assert cluster.spec.users == []
        result = converge(cluster, "apply", command="test-users-remove")
        assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
        assert as_alice(usable, "login1", "true", check=False).returncode != 0
        assert ssh(usable, "login1", "stat -c %U /home/alice").stdout.strip() == "alice"
        assert ssh(usable, "ctl", "sacctmgr -nP show assoc where user=alice format=Account").stdout.strip() == ""
    finally:
        spec.write_text(text)
