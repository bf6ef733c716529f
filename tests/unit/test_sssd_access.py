"""SSSD: who of the directory may log in where, and which of its ids and names count (security issue,
findings 2 and 3). Without an access provider every directory account could log in on the controller,
the accounting and the NFS node; without an id range a directory entry with gid 27 (sudo), uid 64030
(slurm) or a spec user's uid took that id's rights; a directory group named `sudo` matched sudoers'
%sudo by name."""

from __future__ import annotations

import configparser
import textwrap
from pathlib import Path

import pytest

from corral.errors import SpecError
from corral.render.sssd import render_sssd_conf
from corral.spec.loader import load_text
from corral.spec.models_users import PRIVILEGED_GROUPS
from corral.spec.rules import spec_warnings

CA = Path(__file__).resolve().parents[1] / "fixtures" / "ldap" / "ca.pem"
BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, nfs, monitoring]}
      - {names: login1, addresses: [10.0.0.20], roles: [login]}
      - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}
    storage:
      exports: [{path: /srv/nfs/home}]
      mounts: [{path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}]
    """)


def cluster(tmp_path: Path, ldap: str = "", identity: str = "", users: str = ""):
    (tmp_path / "ca.pem").write_bytes(CA.read_bytes())
    text = (BASE + users + "identity:\n" + identity
            + f"  ldap: {{uri: ['ldaps://ldap.example.com'], base: 'dc=example,dc=com', ca_cert: ca.pem{ldap}}}\n")
    (tmp_path / "cluster.yaml").write_text(text)
    return load_text(text, str(tmp_path / "cluster.yaml"))


def conf(c, node: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(render_sssd_conf(c, None, c.node(node)))
    return parser


def test_infrastructure_nodes_deny_every_directory_user(tmp_path):
    c = cluster(tmp_path)
    assert conf(c, "ctl")["domain/corral"]["access_provider"] == "deny"


def test_admin_groups_reach_infrastructure_login_groups_reach_user_nodes(tmp_path):
    c = cluster(tmp_path, ", login_groups: [hpc-users], admin_groups: [hpc-admins, ops]")
    ctl, login, gpu = (conf(c, n)["domain/corral"] for n in ("ctl", "login1", "gpu01"))
    assert (ctl["access_provider"], ctl["simple_allow_groups"]) == ("simple", "hpc-admins, ops")
    assert (login["access_provider"], login["simple_allow_groups"]) == ("simple", "hpc-users")
    assert (gpu["access_provider"], gpu["simple_allow_groups"]) == ("simple", "hpc-users")


def test_a_compute_node_without_pam_slurm_adopt_is_infrastructure(tmp_path):
    c = cluster(tmp_path, ", login_groups: [hpc-users]", identity="  pam_slurm_adopt: false\n")
    assert conf(c, "gpu01")["domain/corral"]["access_provider"] == "deny"
    assert conf(c, "login1")["domain/corral"]["simple_allow_groups"] == "hpc-users"


def test_the_directory_ids_start_at_10000_and_end_below_debians_system_ids(tmp_path):
    domain = conf(cluster(tmp_path), "login1")["domain/corral"]
    assert (domain["min_id"], domain["max_id"]) == ("10000", "59999")
    domain = conf(cluster(tmp_path, ", min_id: 100000, max_id: 0"), "login1")["domain/corral"]
    assert (domain["min_id"], domain["max_id"]) == ("100000", "0")


@pytest.mark.parametrize("ldap, key", [(", min_id: 27", "min_id"), (", min_id: 0", "min_id"),
                                       (", min_id: 20000, max_id: 15000", "max_id"),
                                       (", admin_groups: [sudo]", "admin_groups"),
                                       (", login_groups: [wheel]", "login_groups")])
def test_a_range_reaching_system_ids_or_a_privileged_group_is_a_located_error(tmp_path, ldap, key):
    with pytest.raises(SpecError) as err:
        cluster(tmp_path, ldap)
    assert any(p.where.split("/")[-1].startswith("cluster.yaml:10:") for p in err.value.problems), err.value.problems


def test_an_unlimited_range_and_spec_ids_inside_it_are_warned(tmp_path):
    c = cluster(tmp_path, ", max_id: 0", users="users:\n  - {name: alice, uid: 20001}\n")
    said = " ".join(spec_warnings(c))
    assert "64030" in said and "20001" in said, said


# the class: on every node, whatever the spec says, SSSD has an access provider that is not `permit`,
# a lower id bound at or above 1000, and never returns a privileged group or a system user by name
@pytest.mark.parametrize("ldap", ["", ", login_groups: [a]", ", admin_groups: [b]", ", min_id: 1000, max_id: 0"])
@pytest.mark.parametrize("identity", ["", "  pam_slurm_adopt: false\n"])
def test_every_node_has_an_access_provider_an_id_floor_and_the_filters(tmp_path, ldap, identity):
    c = cluster(tmp_path, ldap, identity)
    for node in c.nodes:
        parsed = conf(c, node.name)
        domain = parsed["domain/corral"]
        assert domain.get("access_provider") in ("simple", "deny"), node.name
        assert int(domain["min_id"]) >= 1000
        groups = {g.strip() for g in parsed["nss"]["filter_groups"].split(",")}
        users = {u.strip() for u in parsed["nss"]["filter_users"].split(",")}
        assert set(PRIVILEGED_GROUPS) <= groups and {"root", "slurm", "munge", c.spec.ssh.user} <= users
