"""Identity hardening on nodes (security issue, findings 2-5): the usable cluster of test_users (ctl also
the NFS node, gpu01-02, login1, alice with her key) after apply. alice's key is on login1 and the compute
nodes only, and she cannot reach ctl; pam_slurm_adopt's access file names users only; her home was made
hers with /etc/skel's files hers too. With a real slapd: directory ids below min_id are not seen, a
directory group named `sudo` gives nothing, the controller denies directory users, and a spec user whose
uid is a directory user's is refused at plan."""

from __future__ import annotations

import json
import shlex

import pytest

from corral.spec.loader import load
from corral.workflows.converge import converge
from tests.vcluster.conftest import ssh
from tests.vcluster import test_users
from tests.vcluster.test_users import LDAP_PW, _slapd_on_ctl, _tls_files, as_alice

usable = test_users.usable  # the session's usable cluster (conftest.py), converged for this module

pytestmark = pytest.mark.vcluster
MORE_LDIF = """dn: uid=carol,ou=people,dc=corral,dc=test
objectClass: inetOrgPerson
objectClass: posixAccount
uid: carol
cn: Carol Directory
sn: Directory
uidNumber: 20001
gidNumber: 20001
homeDirectory: /home/carol
loginShell: /bin/bash

dn: cn=carol,ou=groups,dc=corral,dc=test
objectClass: posixGroup
cn: carol
gidNumber: 20001

dn: cn=sudo,ou=groups,dc=corral,dc=test
objectClass: posixGroup
cn: sudo
gidNumber: 20027
memberUid: carol
"""


@pytest.mark.attack
def test_keys_only_where_users_log_in_and_alice_cannot_reach_the_controller(usable):
    for node in ("login1", "gpu01", "gpu02"):
        ssh(usable, node, "test -s /etc/ssh/authorized_keys/alice")
    assert ssh(usable, "ctl", "test -e /etc/ssh/authorized_keys/alice", check=False).returncode != 0
    assert as_alice(usable, "ctl", "true", check=False).returncode != 0
    assert as_alice(usable, "login1", "id -un").stdout.strip() == "alice"


def test_the_adopt_access_file_names_users_only(usable):
    rules = [line for line in ssh(usable, "gpu01", "cat /etc/security/corral-adopt.conf").stdout.splitlines()
             if line and not line.startswith("#")]
    assert rules == ["+:root:ALL", "-:ALL:ALL"], rules


@pytest.mark.attack
def test_her_home_and_its_files_are_hers(usable):
    owners = ssh(usable, "ctl", "find /srv/nfs/home/alice -maxdepth 1 -name '.*' -printf '%u %y %p\\n'").stdout
    lines = [line.split() for line in owners.splitlines()]
    assert lines and all(u == "alice" for u, _, _ in lines), owners
    assert any(p.endswith("/.bashrc") and t == "f" for _, t, p in lines), owners


@pytest.mark.attack
def test_ldap_ids_access_and_directory_collisions(usable, tmp_path):
    ctl_address = usable.node("ctl").node.address
    tls = _tls_files(tmp_path, ctl_address)
    _slapd_on_ctl(usable, tls)
    ssh(usable, "ctl", f"printf %s {shlex.quote(MORE_LDIF)} | ldapadd -x -H ldap://127.0.0.1 "
                       f"-D cn=admin,dc=corral,dc=test -w {LDAP_PW} >/dev/null")
    spec = usable.cluster.path
    text = spec.read_text()
    (spec.parent / "ldap-ca.pem").write_text(tls["ca.pem"])
    (spec.parent / "ldap-bind").write_text(LDAP_PW + "\n")
    (spec.parent / "ldap-bind").chmod(0o600)
    ldap = (f"identity:\n  ldap:\n    uri: [ldaps://{ctl_address}]\n    base: dc=corral,dc=test\n"
            "    ca_cert: ldap-ca.pem\n    bind_dn: cn=admin,dc=corral,dc=test\n    bind_password_file: ldap-bind\n")
    spec.write_text(text.replace("slurm:\n", ldap + "slurm:\n", 1).replace("users: [root]", "users: [root, carol]"))
    try:
        cluster = load(spec)
        from corral.virtual.cluster import VirtualCluster
        VirtualCluster(cluster).up()
        result = converge(cluster, "apply", command="test-security-ldap-apply")
        assert result.ok, json.dumps(result.to_json(), indent=1)[:6000]
        for node in ("ctl", "login1"):
            assert ssh(usable, node, "getent passwd carol").stdout.split(":")[2] == "20001", node
            # bob's uid 3001 is below min_id (10000): SSSD ignores him
            assert ssh(usable, node, "getent passwd bob", check=False).stdout == "", node
            # the directory's `sudo` group is filtered: carol gets no group of that name
            assert "sudo" not in ssh(usable, node, "id -Gn carol").stdout.split(), node
        # SSSD's PAM profile puts `account sufficient pam_localuser.so` into common-account; a local user
        # (alice) still needs a job on a compute node: pam_slurm_adopt is reached after it
        assert "pam_localuser.so" in ssh(usable, "gpu01", "cat /etc/pam.d/common-account").stdout
        assert as_alice(usable, "gpu01", "true", check=False).returncode != 0
        assert ssh(usable, "gpu01", "true").returncode == 0  # root: exempt, as before
        conf = ssh(usable, "ctl", "grep -E '^(access_provider|min_id|max_id) =' /etc/sssd/sssd.conf").stdout
        assert conf.split("\n")[:3] == ["min_id = 10000", "max_id = 59999", "access_provider = deny"], conf
        assert "access_provider = simple" in ssh(usable, "login1", "cat /etc/sssd/sssd.conf").stdout
        # a spec user with carol's uid: refused at plan on every node, nothing changed
        spec.write_text(spec.read_text().replace("users:\n", "users:\n  - {name: dave, uid: 20001}\n", 1))
        plan = converge(load(spec), "plan", command="test-security-ldap-collision")
        errors = " ".join(n.error or "" for n in plan.nodes.values()) + json.dumps(plan.to_json())
        assert not plan.ok and "20001 is the directory's user carol" in errors, errors[:3000]
        assert ssh(usable, "login1", "getent passwd dave", check=False).stdout == ""
    finally:
        spec.write_text(text)
