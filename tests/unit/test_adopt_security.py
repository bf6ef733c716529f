"""pam_slurm_adopt's exemptions (security issue, finding 4): who may SSH to a compute node without a job
there is root, corral's SSH user and the spec's identity.adopt_exempt_users, each by user name, never a
group (a group of the spec or of the directory named `wheel` or `sudo` used to open every compute node to
its members); privileged group names are refused in the spec."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from corral.errors import SpecError
from corral.render.adopt import access_conf
from corral.spec.loader import load_text

BASE = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-02]", addresses: [10.0.0.11, 10.0.0.12], roles: [compute], gpus: {model: h100, count: 4}}
"""


def _entries(text: str) -> list[str]:
    """Who the access file lets in: the names of its `+` lines."""
    return [name for line in text.splitlines() if line.startswith("+:") for name in line.split(":")[1].split()]


def test_the_access_file_names_no_group():
    text = access_conf("deploy")
    assert _entries(text) == ["root", "deploy"], text
    assert "(" not in "".join(_entries(text))


def test_exempt_users_from_the_spec_are_listed_by_name():
    cluster = load_text(BASE + "identity: {adopt_exempt_users: [ops, backup-agent]}\n", "cluster.yaml")
    assert cluster.spec.identity.adopt_exempt_users == ["ops", "backup-agent"]
    assert _entries(access_conf("root", cluster.spec.identity.adopt_exempt_users)) == ["root", "ops", "backup-agent"]


def test_the_next_ssh_user_may_be_listed_before_the_switch():
    """Switching ssh.user: the new user is listed while the old one still applies; once it is ssh.user the
    entry is a harmless duplicate (listed once in the file), not an error."""
    before = load_text(BASE + "identity: {adopt_exempt_users: [deploy, ops]}\n", "cluster.yaml")
    assert _entries(access_conf(before.spec.ssh.user, before.spec.identity.adopt_exempt_users)) == \
        ["root", "deploy", "ops"]
    after = load_text(BASE + "ssh: {user: deploy}\nidentity: {adopt_exempt_users: [deploy, ops]}\n",
                      "cluster.yaml")
    assert _entries(access_conf(after.spec.ssh.user, after.spec.identity.adopt_exempt_users)) == \
        ["root", "deploy", "ops"]


PRIVILEGED = ["sudo", "wheel", "adm", "root", "shadow", "disk", "docker", "lxd", "systemd-journal", "kmem",
              "staff", "admin", "libvirt", "kvm"]


@pytest.mark.parametrize("name", PRIVILEGED)
def test_a_privileged_group_in_groups_is_a_located_error(name):
    with pytest.raises(SpecError) as err:
        load_text(BASE + f"groups:\n  - {{name: {name}, gid: 3000}}\n", "cluster.yaml")
    assert any(p.where.startswith("cluster.yaml:6:") and "privileged" in p.message for p in err.value.problems), \
        err.value.problems


@pytest.mark.parametrize("key", ["group", "groups"])
def test_a_user_in_a_privileged_group_is_a_located_error(key):
    value = "wheel" if key == "group" else "[wheel]"
    with pytest.raises(SpecError) as err:
        load_text(BASE + f"users:\n  - {{name: eve, uid: 2001, {key}: {value}}}\n", "cluster.yaml")
    assert any(p.where.startswith("cluster.yaml:6:") and "privileged" in p.message for p in err.value.problems), \
        err.value.problems


def test_root_or_a_group_syntax_is_no_exempt_user():
    for bad in ("root", "(wheel)", "ALL", "@admins"):
        with pytest.raises(SpecError) as err:
            load_text(BASE + f"identity: {{adopt_exempt_users: ['{bad}']}}\n", "cluster.yaml")
        assert err.value.problems[0].where.startswith("cluster.yaml:5:"), (bad, err.value.problems)


# the class: whatever the spec's SSH user and exempt list, the access file lets in exactly root, the SSH
# user and the exempt users, by name: no group, no pattern, no line pam_access reads as something else
NAME = st.from_regex(re.compile(r"[a-z_][a-z0-9_-]{0,15}"), fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(ssh_user=NAME, exempt=st.lists(NAME, max_size=5))
def test_only_named_users_pass_without_a_job(ssh_user, exempt):
    text = access_conf(ssh_user, exempt)
    assert _entries(text) == list(dict.fromkeys(["root", ssh_user, *exempt]))
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert rules[-1] == "-:ALL:ALL" and all(line.startswith("+:") for line in rules[:-1])
    assert all(re.fullmatch(r"[a-z_][a-z0-9_-]*", n) and n != "ALL" for n in _entries(text))
