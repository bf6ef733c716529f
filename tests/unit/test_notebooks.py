"""workbench.jupyterhub without a node: the spec's located errors, what the hub is told (settings.json, its
unit), the spawn form and its checks against the spec's choices and the user's QOS (captured sacctmgr
output), the cluster CA's certificates, the pinned wheel lists, and where the components apply."""

from __future__ import annotations

import datetime
import json
import os
import re
import ssl
import subprocess
import textwrap

import pytest
from cryptography import x509

from corral import site_ca, workbench_wheels
from corral.components import gates
from corral.components.views import node_packages
from corral.errors import SpecError
from corral.node import notebook_form as form
from corral.render import jupyterhub
from corral.spec.loader import load_text

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, nfs]}
      - {names: "gpu[01-02]", addresses: [10.0.0.11, 10.0.0.12], roles: [compute], gpus: {model: h100, count: 4}}
      - {names: gpu03, addresses: [10.0.0.14], roles: [compute],
         gpus: {model: a100, count: 2, mig: [{gpus: "0", profiles: [3g.40gb, 3g.40gb]}]}}
      - {names: login1, addresses: [10.0.0.13], roles: [login]}
    storage:
      exports: [{path: /srv/nfs/sw}, {path: /srv/nfs/home}]
      mounts: [{path: /sw, export: /srv/nfs/sw}, {path: /home, export: /srv/nfs/home}]
    nvidia: {mig_parted: {sha256: skip}}
    software: {}
    slurm:
      partitions: [{name: gpu, nodes: "gpu[01-02]", default: true, qos: short}, {name: mig, nodes: gpu03}]
      qos: [{name: short, max_gpus_per_user: 4, max_wall: "1:00:00"}]
    users:
      - {name: alice, uid: 2001, password: true}
    """)
HUB = "workbench:\n  jupyterhub:\n"
LDAP = "identity:\n  ldap:\n      uri: [ldaps://ldap.example.com]\n      base: dc=example,dc=com\n"


def problems(extra: str, base: str = BASE) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_text(base + extra, "cluster.yaml")
    return [f"{p.where}: {p.message}" for p in err.value.problems]


def loads(extra: str = HUB + "    {}\n", base: str = BASE):
    return load_text(base + extra, "cluster.yaml")


# --- the spec -----------------------------------------------------------------------------------------------

def test_unknown_partition_and_gpu_type_in_the_forms_choices_are_located_errors():
    found = problems(HUB + "    partitions: [gpu, cpu]\n    gpu_types: [h100, v100]\n")
    assert found == ["cluster.yaml:20:23: not a partition of the cluster",
                     "cluster.yaml:21:23: no node of the form's partitions has GPUs of this type"], found


def test_the_hub_needs_a_login_node_the_software_root_and_a_sane_time():
    assert problems(HUB + "    node: gpu01\n") == ["cluster.yaml:20:11: gpu01 is not a login node of the spec"]
    no_software = BASE.replace("software: {}\n", "")
    assert [p.split(": ", 1)[1] for p in problems(HUB + "    {}\n", no_software)] == [
        "the hub's venv lives on the shared software root, and software: is not set"]
    found = problems(HUB + "    default_time: 9h\n    max_time: 8h\n")
    assert found == ["cluster.yaml:20:19: longer than max_time (28800 s)"], found


def test_a_release_without_pinned_wheels_and_a_python_mismatch_are_refused():
    ubuntu = BASE.replace("roles: [login]}", "roles: [login], os: ubuntu-24.04}")
    found = problems(HUB + "    {}\n", ubuntu)
    assert any("corral pins no notebook wheels for Python 3.12" in p for p in found), found
    assert any("the one venv on the software root serves both" in p for p in found), found


def test_a_site_key_readable_by_others_is_refused_and_a_missing_file_named(tmp_path):
    cert, key = tmp_path / "hub.pem", tmp_path / "hub.key"
    cert.write_text("x")
    key.write_text("x")
    os.chmod(key, 0o644)
    line = f"    tls: {{cert: {cert}, key: {key}}}"
    column = line.rindex(str(key)) + 1  # the key's value, wherever pytest's tmp_path puts it
    found = problems(HUB + line + "\n")
    assert found == [f"cluster.yaml:20:{column}: the private key is readable by others (mode 0644)"], found
    os.chmod(key, 0o600)
    assert loads(HUB + f"    tls: {{cert: {cert}, key: {key}}}\n").spec.workbench.jupyterhub.tls.key == str(key)
    found = problems(HUB + f"    tls: {{cert: {tmp_path}/nope.pem, key: {key}}}\n")
    assert found == ["cluster.yaml:20:17: cannot read it: No such file or directory"], found


def test_a_password_without_a_login_node_is_refused():
    base = BASE.replace("  - {names: login1, addresses: [10.0.0.13], roles: [login]}\n", "")
    assert problems("", base) == ["cluster.yaml:16:40: a password is for logins on login nodes, and the spec "
                                  "has none"]


# --- what the hub is told -----------------------------------------------------------------------------------

def test_settings_offer_the_partitions_gpu_types_and_limits():
    cluster = loads(HUB + "    max_time: 4h\n    default_time: 30m\n    admins: [alice]\n")
    s = json.loads(jupyterhub.settings_json(cluster, "0123456789abcdef"))
    assert s["partitions"] == [
        {"name": "gpu", "default": True, "qos": "short", "max_time": "INFINITE", "gpus": {"h100": 4}},
        {"name": "mig", "default": False, "qos": None, "max_time": "INFINITE", "gpus": {"a100": 1, "3g.40gb": 2}}]
    assert (s["address"], s["port"], s["venv"], s["python"]) == (
        "10.0.0.13", 8443, "/sw/.corral/jupyterhub/0123456789abcdef",
        "/sw/.corral/jupyterhub/0123456789abcdef/bin/python")
    assert (s["default_time"], s["max_time"], s["admins"], s["idle_timeout"]) == ("0:30:00", "4:00:00", ["alice"], 3600)
    assert s["users"] == sorted(u.name for u in cluster.spec.users) and s["users"]  # seeded in the hub's database
    narrowed = loads(HUB + "    partitions: [mig]\n    gpu_types: [3g.40gb]\n")
    assert jupyterhub.offered(narrowed) == [{"name": "mig", "default": True, "qos": None, "max_time": "INFINITE",
                                            "gpus": {"3g.40gb": 2}}]


def test_the_unit_runs_the_hub_from_the_venv_with_its_restart_policy():
    text = jupyterhub.unit("/sw/.corral/jupyterhub/0123456789abcdef", 8443)
    lines = text.splitlines()
    assert ("ExecStart=/sw/.corral/jupyterhub/0123456789abcdef/bin/python -I /sw/.corral/jupyterhub/0123456789abcdef/"
            "bin/jupyterhub -f /etc/corral/jupyterhub/jupyterhub_config.py") in lines
    assert "Restart=on-failure" in text and "After=network-online.target" in text and "UMask=0077" in text
    # never root: its own user, PAM through group shadow, no capability unless the port needs one
    assert {"User=corral-jupyterhub", "Group=corral-jupyterhub", "SupplementaryGroups=shadow"} <= set(lines)
    assert "Capabilit" not in text
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in jupyterhub.unit("/sw/v", 443).splitlines()
    assert jupyterhub.SYSUSERS_TEXT.splitlines()[1] == (
        'u corral-jupyterhub - "corral notebook hub" /var/lib/corral-jupyterhub /usr/sbin/nologin')


def test_the_sudo_rule_lets_the_hub_run_slurms_commands_as_the_spec_users_alone(tmp_path):
    cluster = loads(base=BASE.replace("users:\n", "users:\n  - {name: bob, uid: 2002}\n"))
    text = jupyterhub.sudoers(cluster)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ['Defaults:corral-jupyterhub !requiretty, !pam_session, env_keep += "JUPYTERHUB_* JPY_*"',
                     "Runas_Alias CORRAL_NOTEBOOK_USERS = bob, alice",
                     "corral-jupyterhub ALL = (CORRAL_NOTEBOOK_USERS) NOPASSWD: /usr/bin/sbatch, /usr/bin/scancel, "
                     "/usr/bin/squeue"], lines
    # the commands are settings.json's table, the one node/notebook_slurm.py builds each argv from
    s = json.loads(jupyterhub.settings_json(cluster, "0123456789abcdef"))
    assert sorted({argv[0] for argv in s["slurm"].values()}) == ["/usr/bin/sbatch", "/usr/bin/scancel", "/usr/bin/squeue"]
    ldap = loads(base=BASE + LDAP + "      login_groups: [hpc, ml]\n")
    assert "Runas_Alias CORRAL_NOTEBOOK_USERS = alice, %hpc, %ml" in jupyterhub.sudoers(ldap).splitlines()
    nobody = jupyterhub.sudoers(loads(base=BASE.replace("users:\n  - {name: alice, uid: 2001, password: true}\n", "")))
    assert "NOPASSWD" not in nobody and "Runas_Alias" not in nobody
    for i, rule in enumerate((text, jupyterhub.sudoers(ldap), nobody)):  # sudo's own parser takes each
        path = tmp_path / f"rule{i}"
        path.write_text(rule)
        check = subprocess.run(["visudo", "-cf", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_directory_without_login_groups_is_refused_beside_a_hub():
    assert problems(HUB + "    {}\n", BASE + LDAP) == [
        "cluster.yaml:20:7: the notebook hub starts servers as a user only through a sudo rule that names its users, "
        "and without login_groups every directory user may log in: they cannot be named"]
    assert loads("", BASE + LDAP).spec.identity.ldap.login_groups == []  # without a hub: every directory user


def test_the_hub_takes_only_corrals_unix_user_names():
    pattern = json.loads(jupyterhub.settings_json(loads(), "0123456789abcdef"))["user_pattern"]
    assert re.match(pattern, "alice") and re.match(pattern, "svc_batch-2")
    for name in ("bob;id", "o'brien", "bob id", "bob\n", "Bob", "-rf", "a" * 33, "%hpc", "ALL"):
        assert not re.match(pattern, name), name


def test_where_the_components_apply_and_what_they_install():
    cluster = loads()
    by = {n.name: n for n in cluster.nodes}
    assert [n for n in by if gates.jupyterhub(cluster, by[n])] == ["login1"]
    assert [n for n in by if gates.notebook_builder(cluster, by[n])] == ["ctl"]  # the NFS server writes /sw
    assert [n for n in by if gates.passwords(cluster, by[n])] == ["login1"]
    assert "node-configurable-http-proxy" in node_packages(cluster, by["login1"])
    assert "python3-venv" in node_packages(cluster, by["ctl"])
    assert "node-configurable-http-proxy" not in node_packages(cluster, by["gpu01"])
    assert not gates.jupyterhub(loads(""), by["login1"])


# --- the form ------------------------------------------------------------------------------------------------

SETTINGS = {"partitions": [{"name": "gpu", "default": True, "qos": "normal", "gpus": {"h100": 4}},
                           {"name": "mig", "default": False, "qos": None, "gpus": {"3g.40gb": 2}}],
            "max_gpus": 4, "max_cpus": 16, "max_memory_gb": 64, "default_time": "2:00:00", "max_time": "8:00:00"}


def ask(**fields) -> dict:
    base = {"partition": "gpu", "gpu_type": "h100", "gpus": "1", "cpus": "2", "memory_gb": "4", "time": "1:00:00"}
    return {k: [v] for k, v in {**base, **fields}.items()}


def test_slurm_times_in_minutes():
    assert [form.minutes(t) for t in ("30", "1:30", "2:00:00", "1-00", "1-02:30", "1-00:00:01", "INFINITE")] == [
        30, 2, 120, 1440, 1590, 1441, None]
    with pytest.raises(ValueError):
        form.minutes("2h")


def test_the_form_offers_the_choices_escaped():
    hostile = {**SETTINGS, "partitions": [{"name": "gpu<script>", "default": True, "gpus": {"h100": 4}}]}
    text = form.form_html(hostile)
    assert '<option value="gpu&lt;script&gt;" selected>' in text and "<script>" not in text
    assert 'name="gpus" id="gpus" min="0" max="4" value="1"' in form.form_html(SETTINGS)


def test_a_request_within_the_choices_becomes_batchspawners_request():
    req = form.parse(ask(), SETTINGS)
    assert form.batch_request(req) == {"req_partition": "gpu", "req_nprocs": "2", "req_memory": "4G",
                                       "req_runtime": "1:00:00", "req_gres": "gpu:h100:1"}
    assert form.batch_request(form.parse(ask(gpus="0", gpu_type="anything"), SETTINGS))["req_gres"] == ""
    assert form.batch_request(form.parse(ask(memory_gb="0"), SETTINGS))["req_memory"] == ""  # DefMemPerCPU


@pytest.mark.parametrize(("fields", "reason"), [
    ({"partition": "cpu"}, "partition: 'cpu' is not one of gpu, mig"),
    ({"gpu_type": "3g.40gb"}, "GPU type: partition gpu has no '3g.40gb' GPUs (it has: h100)"),
    ({"gpus": "5"}, "GPUs: 5 is outside 0..4"),
    ({"partition": "mig", "gpu_type": "3g.40gb", "gpus": "3"}, "a node of partition mig has at most 2 3g.40gb GPUs"),
    ({"gpus": "1; rm -rf /"}, "GPUs: a whole number from 0 to 4"),
    ({"time": "9:00:00"}, "time limit: '9:00:00' is not within 0:01:00..8:00:00"),
    ({"time": "0"}, "is not within"),
    ({"cpus": "0"}, "CPUs: 0 is outside 1..16"),
])
def test_a_request_outside_the_choices_is_refused_with_the_reason(fields, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        form.parse(ask(**fields), SETTINGS)


ASSOC = "alice|short|normal,short\nalice|normal|normal\n"  # sacctmgr -nP show assoc user=alice format=user,defaultqos,qos
QOS = "normal||\nshort|gres/gpu=1|01:00:00\nlong|cpu=64,gres/gpu=8|2-00:00:00\n"  # format=name,maxtrespu,maxwall


def test_an_api_spawn_is_checked_as_the_form_is():
    assert form.parse(form.formdata(None, SETTINGS), SETTINGS) == {
        "partition": "gpu", "gpu_type": "", "gpus": 0, "cpus": 1, "memory_gb": 0, "time": "2:00:00"}
    api = {"partition": "gpu", "gpu_type": "h100", "gpus": 2, "cpus": 4, "time": "1:00:00"}
    assert form.batch_request(form.parse(form.formdata(api, SETTINGS), SETTINGS))["req_gres"] == "gpu:h100:2"
    with pytest.raises(ValueError, match="partition"):
        form.parse(form.formdata({"partition": "gpu\n#SBATCH --qos=high"}, SETTINGS), SETTINGS)


def test_the_users_qos_bounds_the_request():
    limits = form.qos_limits(QOS)
    assert limits == {"normal": {"gpus_per_user": None, "wall": None}, "short": {"gpus_per_user": 1, "wall": 60},
                      "long": {"gpus_per_user": 8, "wall": 2880}}
    assert form.user_qos(ASSOC, "alice") == ["short"]
    assert form.user_qos("bob||normal,long\n", "bob") == ["long", "normal"]
    req = form.parse(ask(gpus="2"), SETTINGS)
    assert form.qos_refusal(req, ["short"], limits) == (
        "GPUs: 2 asked, but QOS short allows you 1 at a time (MaxTRESPerUser gres/gpu)")
    assert form.qos_refusal(form.parse(ask(time="2:00:00"), SETTINGS), ["short"], limits) == (
        "time limit: 2:00:00 asked, but QOS short allows at most 60 minutes (MaxWall)")
    assert form.qos_refusal(req, ["normal"], limits) is None
    assert "QOS short" in form.qos_refusal(req, ["normal"], limits, partition_qos="short")


# --- the cluster CA ------------------------------------------------------------------------------------------

def test_the_ca_signs_a_certificate_a_client_verifies_and_keeps_it(tmp_path):
    made = site_ca.server_cert(tmp_path, "lab", "jupyterhub", ["login1", "10.0.0.13"])
    leaf = x509.load_pem_x509_certificate(made.cert.encode())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["login1"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.13"]
    ca = x509.load_pem_x509_certificate(made.ca.encode())
    leaf.verify_directly_issued_by(ca)
    ctx = ssl.create_default_context(cadata=made.ca)  # Python's own client accepts the CA
    assert ctx.cert_store_stats()["x509_ca"] == 1
    assert leaf.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc) > datetime.timedelta(days=800)
    key = tmp_path / "secrets" / "ca" / "ca.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600" and "PRIVATE KEY" not in made.cert
    again = site_ca.server_cert(tmp_path, "lab", "jupyterhub", ["10.0.0.13", "login1"])
    assert again == made  # the same names: the same bytes, so a re-run changes nothing on the node
    renamed = site_ca.server_cert(tmp_path, "lab", "jupyterhub", ["login1", "10.0.0.13", "hub.example.com"])
    assert renamed.cert != made.cert and renamed.ca == made.ca


def test_a_new_ca_vouches_only_for_the_clusters_names(tmp_path):
    """Security review 3, N16: every node trusts the CA system-wide, so a CA made now carries name constraints: a
    certificate it signs for the cluster's names verifies (OpenSSL's own check), one for pypi.org does not, and
    corral refuses to sign a name outside them, saying how to get a CA that covers it."""
    import subprocess
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from corral.errors import CorralError
    from corral.render.ca_scope import ca_scope
    cluster = loads(HUB + "    names: [hub.example.com]\n")
    scope = ca_scope(cluster)
    assert {"login1", "10.0.0.13", "ctl", "hub.example.com"} <= set(scope)
    made = site_ca.server_cert(tmp_path, "lab", "jupyterhub", jupyterhub.cert_names(cluster), scope)
    (tmp_path / "ca.pem").write_text(made.ca)
    (tmp_path / "hub.pem").write_text(made.cert.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")

    def verify(leaf: str) -> subprocess.CompletedProcess:
        return subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.pem"), leaf], capture_output=True,
                              text=True)
    assert verify(str(tmp_path / "hub.pem")).returncode == 0
    ca, ca_key = site_ca.authority(tmp_path, "lab", scope)
    k = ec.generate_private_key(ec.SECP256R1())
    forged = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca.subject).public_key(k.public_key())
              .serial_number(1).not_valid_before(datetime.datetime(2026, 1, 1))
              .not_valid_after(datetime.datetime(2030, 1, 1))
              .add_extension(x509.SubjectAlternativeName([x509.DNSName("pypi.org")]), critical=False)
              .sign(ca_key, hashes.SHA256()))  # what a leaked CA key could sign
    (tmp_path / "pypi.pem").write_bytes(forged.public_bytes(serialization.Encoding.PEM))
    refused = verify(str(tmp_path / "pypi.pem"))
    assert refused.returncode != 0 and "subtree violation" in refused.stdout + refused.stderr
    with pytest.raises(CorralError, match="may vouch only for the names it was made for, not pypi.org"):
        site_ca.server_cert(tmp_path, "lab", "registry", ["pypi.org"], scope)


def test_a_half_there_ca_is_refused(tmp_path):
    site_ca.ca_pem(tmp_path, "lab")
    (tmp_path / "secrets" / "ca" / "ca.key").unlink()
    with pytest.raises(Exception, match="half there"):
        site_ca.ca_pem(tmp_path, "lab")


# --- the pinned wheels ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("python", workbench_wheels.PYTHONS)
def test_every_wheel_is_pinned_with_its_sha256(python):
    pins = workbench_wheels.pins(workbench_wheels.lock_text(python))
    assert {"jupyterhub", "batchspawner", "jupyterlab", "jupyterhub-idle-culler", "pamela"} <= set(pins)
    assert pins["batchspawner"][0] == "1.3.0" and pins["jupyterhub"][0].startswith("5.")
    assert len(workbench_wheels.lock_id(python)) == 16


def test_a_line_without_a_hash_is_refused():
    with pytest.raises(ValueError, match="2: not a pinned, hashed wheel"):
        workbench_wheels.pins("# comment\njupyterhub==5.5.4\n")


def test_a_cached_wheelhouse_is_checked_against_the_list(tmp_path, monkeypatch):
    whl = tmp_path / "a-1.0-py3-none-any.whl"
    whl.write_bytes(b"wheel")
    import hashlib
    good = {"a": ("1.0", hashlib.sha256(b"wheel").hexdigest())}
    assert workbench_wheels._complete(tmp_path, good)
    whl.write_bytes(b"tampered")
    assert not workbench_wheels._complete(tmp_path, good)


# --- validate's notebook check -------------------------------------------------------------------------------

def test_the_checks_command_keeps_the_tokens_off_its_command_line():
    from corral.checks import notebook
    cluster = loads()
    cmd = notebook.command(cluster, "alice", 120)
    assert cmd.startswith("set -a; . /etc/corral/jupyterhub/hub.env; set +a; ")
    assert "TOKEN" not in cmd.split("set +a;", 1)[1]
    assert notebook.options(cluster) == {"partition": "gpu", "gpus": 1, "gpu_type": "h100", "cpus": 1,
                                         "time": "0:10:00"}
    assert "/sw/.corral/jupyterhub/" in cmd and cmd.endswith("notebook_check.py alice http://10.0.0.13:8081 http://127.0.0.1:8001 120")


@pytest.mark.parametrize(("out", "status", "detail"), [
    ('{"user": "alice", "job": "12", "gpus": "0", "host": "gpu01", "stop_asked": true}', "OK",
     "alice's server ran as job 12 on gpu01 with GPU 0; a cell ran in its kernel"),
    ('{"user": "alice", "job": "12", "gpus": "0,1", "host": "gpu01"}', "FAIL", "job 12 sees GPUs '0,1', 1 asked"),
    ('{"user": "alice", "job": "-", "gpus": "-", "host": "login1"}', "FAIL", "printed no Slurm job id"),
    ('{"user": "alice", "error": "the server did not start in time", "stop_asked": true}', "FAIL",
     "alice's server: the server did not start in time"),
    ("Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'tornado'", "FAIL",
     "no answer from the check"),
])
def test_the_checks_answer_is_judged(out, status, detail):
    from corral.checks.notebook import judge
    got = judge(out, {"gpus": 1})
    assert got[0] == status and detail in got[1], got


def test_a_carried_wheelhouse_is_checked_against_corrals_own_list(tmp_path, monkeypatch):
    import hashlib
    from corral.errors import CorralError
    good = b"the one wheel"
    listed = f"one==1.0 --hash=sha256:{hashlib.sha256(good).hexdigest()}\n"
    monkeypatch.setattr(workbench_wheels, "lock_text", lambda python, venv=None: listed)
    d = tmp_path / "notebook" / "py3.11"
    d.mkdir(parents=True)
    (d / "one-1.0-py3-none-any.whl").write_bytes(good)
    assert workbench_wheels.checked_dir(d, "3.11") == d
    (d / "requirements.txt").write_text("one==1.0\n")  # the carried list is never what pip reads
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(workbench_wheels.packed(d, "3.11"))) as tar:
        assert tar.getnames() == ["one-1.0-py3-none-any.whl", "requirements.txt"]
        assert tar.extractfile("requirements.txt").read().decode() == listed
    (d / "extra-1.0-py3-none-any.whl").write_bytes(b"smuggled")  # a wheel the list does not name
    with pytest.raises(CorralError, match="does not carry the notebook hub's 1 files"):
        workbench_wheels.checked_dir(d, "3.11")
    (d / "extra-1.0-py3-none-any.whl").unlink()
    (d / "one-1.0-py3-none-any.whl").write_bytes(b"tampered, its own SHA256SUMS updated")
    with pytest.raises(CorralError):
        workbench_wheels.checked_dir(d, "3.11")
