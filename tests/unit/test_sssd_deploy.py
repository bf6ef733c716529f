"""The sssd deploy planned through the engine against the private sshd on loopback (this machine, which
has no SSSD): every op plans without error, the plan shows nsswitch.conf's diff and the sssd.conf
diff with the bind password masked, and the password is nowhere in the result nor in the journal.
Plan changes nothing. Without identity.ldap the deploy plans nothing."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from conftest_engine import make_cluster, sshd  # noqa: E402,F401

from corral.deploy.sssd import sssd  # noqa: E402
from corral.engine import journal  # noqa: E402
from corral.engine.runner import run  # noqa: E402

PASSWORD = "Bind-Pw-7qZ2xK"
CA = Path(__file__).resolve().parents[1] / "fixtures" / "ldap" / "ca.pem"
LDAP = """\
identity:
  ldap:
    uri: [ldaps://ldap.example.com]
    base: dc=example,dc=com
    ca_cert: ldap-ca.pem
    bind_dn: cn=reader,dc=example,dc=com
    bind_password_file: ldap-bind
"""


def test_plan_masks_the_bind_password_everywhere(tmp_path, sshd):  # noqa: F811
    (tmp_path / "ldap-ca.pem").write_bytes(CA.read_bytes())
    (tmp_path / "ldap-bind").write_text(PASSWORD + "\n")
    (tmp_path / "ldap-bind").chmod(0o600)
    cluster = make_cluster(tmp_path, sshd, extra=LDAP)
    nsswitch_before = Path("/etc/nsswitch.conf").read_bytes()
    plan = run(cluster, [sssd], mode="plan", limit=["ctl1"])
    assert plan.ok, json.dumps(plan.to_json(), indent=1)[:4000]
    ops = {o.name: o for o in plan.nodes["ctl1"].ops}
    conf = ops["sssd | sssd.conf and the LDAP CA certificate"]
    assert conf.status == "changed"
    text = json.dumps(plan.to_json())
    assert PASSWORD not in text
    assert "ldap_default_authtok =********" in text and "ldap_uri = ldaps://ldap.example.com" in text
    if b"sss" not in nsswitch_before:  # this machine has no SSSD: the plan adds sss
        assert "+passwd:" in text and " sss" in text
    assert Path("/etc/nsswitch.conf").read_bytes() == nsswitch_before, "plan must not change a node"
    assert not Path("/etc/sssd/sssd.conf").exists() or b"ldap.example.com" not in Path(
        "/etc/sssd/sssd.conf").read_bytes()
    dump = "\n".join(sqlite3.connect(journal.journal_path(cluster.state_dir)).iterdump())
    assert PASSWORD not in dump


def test_without_ldap_the_deploy_plans_nothing(tmp_path, sshd):  # noqa: F811
    cluster = make_cluster(tmp_path, sshd)
    plan = run(cluster, [sssd], mode="plan", limit=["ctl1"])
    assert plan.ok and plan.nodes["ctl1"].ops == []
