"""Local accounts (deploy/users.py, deploy/users_plan.py): planning edge cases the operation cases
(tests/operations/accounts/) do not show, spec values reaching commands as single words, where homes
are made, and the deploy planned end to end against this machine through the private sshd (plan only:
nothing changes)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from corral.deploy.users import home_base, home_script
from corral.deploy.users_plan import NOLOGIN, plan_accounts, record_text
from corral.errors import CorralError
from corral.facts.accounts import parse_accounts
from corral.spec.loader import load_text
from corral.spec.models_users import Group, User

sys.path.insert(0, str(Path(__file__).parent))
from conftest_engine import make_cluster, sshd  # noqa: E402,F401

SYSTEM = ["P|root:x:0:0:root:/root:/bin/bash", "P|corral:x:1000:1000:corral,,,:/home/corral:/bin/bash",
          "G|root:x:0:", "G|video:x:44:", "G|corral:x:1000:"]
SPEC = """\
name: lab
nodes:
  - names: ctl1
    addresses: [10.0.0.10]
    roles: [controller, accounting, nfs]
  - names: gpu[01-02]
    addresses: 10.0.0.[11-12]
    roles: [compute]
storage:
  exports:
    - path: /srv/nfs/home
  mounts:
    - path: /home
      export: /srv/nfs/home
groups:
  - name: ml
    gid: 3000
users:
  - name: alice
    uid: 2001
    group: ml
    full_name: Alice Liddell
"""


def accounts(*lines: str):
    return parse_accounts([*SYSTEM, *lines])


def argv(plan) -> list[list[str]]:
    return [shlex.split(c.get_raw_value()) for c in plan.commands]


# --- planning ------------------------------------------------------------------------------------


def test_full_name_with_spaces_and_option_like_values_stay_one_argv_word():
    # the spec refuses a full name starting with '-'; the planner still quotes one (model_construct skips the check)
    u = User.model_construct(**{**User(name="alice", uid=2001).__dict__, "full_name": "-o Alice  de la Tour",
                                "shell": "/usr/bin/fish"})
    plan = plan_accounts([u], [], "/shared homes", "gpu01", accounts())
    useradd = argv(plan)[1]
    assert useradd == ["useradd", "-u", "2001", "-g", "alice", "-s", "/usr/bin/fish", "-d",
                       "/shared homes/alice", "-M", "-c", "-o Alice  de la Tour", "alice"]
    changed = plan_accounts([u.model_copy(update={"full_name": "Alice B. Tour"})], [], "/shared homes", "gpu01",
                            accounts("P|alice:x:2001:2001:-o Alice  de la Tour:/shared homes/alice:/usr/bin/fish",
                                     "G|alice:x:2001:", "R|alice 2001 active"))
    assert argv(changed) == [["usermod", "-c", "Alice B. Tour", "alice"]]


def test_home_script_quotes_the_path_and_makes_nothing_over_an_existing_one():
    script = home_script("/srv/nfs/my homes/alice", 2001, 3000)
    assert script.startswith("if [ -e '/srv/nfs/my homes/alice' ] || [ -L '/srv/nfs/my homes/alice' ]; then echo")
    assert "install -d -m 0700 -o 0 -g 0 '/srv/nfs/my homes/alice'" in script
    assert "cp -RPT /etc/skel '/srv/nfs/my homes/alice'" in script
    assert "find '/srv/nfs/my homes/alice' -mindepth 1 -exec chown -h 2001:3000 {} +" in script
    assert script.endswith("chown 2001:3000 '/srv/nfs/my homes/alice'; fi")


def test_personal_group_gid_taken_by_another_group_is_located_at_the_uid():
    with pytest.raises(CorralError) as err:
        plan_accounts([User(name="bob", uid=2002)], [], "/home", "gpu01", accounts("G|staff:x:2002:"))
    assert str(err.value).startswith("users[0].uid: 2002 is already group staff's on gpu01 (the personal group bob")


def test_spec_group_gid_taken_by_another_name():
    with pytest.raises(CorralError, match=r"^groups\[0\]\.gid: 1000 is already group corral's on gpu01; "
                                          r"fix: choose a free gid"):
        plan_accounts([], [Group(name="ml", gid=1000)], "/home", "gpu01", accounts())


def test_every_problem_is_told_at_once():
    with pytest.raises(CorralError) as err:
        plan_accounts([User(name="bob", uid=1000), User(name="corral", uid=2005, group="ml")],
                      [Group(name="ml", gid=3000)], "/home", "gpu01", accounts())
    assert str(err.value) == ("users[0].uid: 1000 is already user corral's on gpu01 (and 1 more: users[1].uid: user "
                              "corral exists on gpu01 with uid 1000); fix: choose a free uid, or set uid: to the "
                              "existing account's")


def test_an_expired_managed_user_in_the_spec_is_unlocked():
    plan = plan_accounts([User(name="bob", uid=2002)], [], "/home", "gpu01",
                         accounts("P|bob:x:2002:2002::/home/bob:/bin/bash", "G|bob:x:2002:", "R|bob 2002 active",
                                  "S|bob|L|19000"))
    assert argv(plan) == [["usermod", "-U", "-e", "", "bob"]]
    assert plan.diff == ["unlock user bob (its account had expired)"] and not plan.record_changed


def test_a_removed_account_deleted_by_hand_stays_recorded_locked():
    plan = plan_accounts([], [], "/home", "gpu01", accounts("R|bob 2002 active"))
    assert plan.commands == [] and record_text(plan.record) == "bob 2002 locked\n" and plan.record_changed


def test_a_recorded_name_now_with_another_uid_is_not_corrals_to_lock():
    plan = plan_accounts([], [], "/home", "gpu01",
                         accounts("P|bob:x:4000:4000::/home/bob:/bin/bash", "R|bob 2002 locked", "S|bob|L|1"))
    assert plan.commands == [] and plan.record == {} and plan.record_changed
    assert plan.diff == ["forget user bob (uid 4000 now, corral's was 2002: not corral's)"]


def test_a_locked_user_whose_shell_came_back_is_locked_again():
    plan = plan_accounts([], [], "/home", "gpu01",
                         accounts("P|bob:x:2002:2002::/home/bob:/bin/bash", "R|bob 2002 locked", "S|bob|L|1"))
    assert argv(plan) == [["usermod", "-L", "-e", "1", "-s", NOLOGIN, "bob"]] and not plan.record_changed


def test_primary_group_change_is_by_name():
    plan = plan_accounts([User(name="bob", uid=2002, group="ml")], [Group(name="ml", gid=3000)], "/home", "gpu01",
                         accounts("P|bob:x:2002:2002::/home/bob:/bin/bash", "G|bob:x:2002:", "G|ml:x:3000:",
                                  "R|bob 2002 active"))
    assert argv(plan) == [["usermod", "-g", "ml", "bob"]]
    assert plan.diff == ["~ user bob: primary group bob -> ml"]


# --- where homes are made ------------------------------------------------------------------------


def test_homes_are_made_on_the_nfs_server_only_in_its_exported_directory():
    cluster = load_text(SPEC)
    assert {n.name: home_base(cluster, n) for n in cluster.nodes} == {
        "ctl1": "/srv/nfs/home", "gpu01": None, "gpu02": None}


def test_local_homes_are_made_on_every_node():
    text = SPEC.replace("roles: [controller, accounting, nfs]", "roles: [controller, accounting]")
    text = text[:text.index("storage:")] + text[text.index("groups:"):]
    cluster = load_text(text)
    assert {home_base(cluster, n) for n in cluster.nodes} == {"/home"}


# --- the deploy, planned on this machine ---------------------------------------------------------


def test_deploy_plans_accounts_keys_drop_in_and_homes_without_changing_anything(tmp_path, sshd):  # noqa: F811
    import pwd

    from corral.deploy.users import users
    from corral.engine.runner import run
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT t@x"
    extra = ("groups:\n  - name: corraltest-g\n    gid: 52340\n"
             "users:\n  - name: corraltest-a\n    uid: 52341\n    group: corraltest-g\n    full_name: Test User\n"
             f"    ssh_keys: [\"{key}\"]\n  - name: corraltest-b\n    uid: 52342\n"
             f"identity:\n  homes: {tmp_path}/homes\n  pam_slurm_adopt: true\n")
    cluster = make_cluster(tmp_path, sshd, extra=extra)
    for name in ("corraltest-a", "corraltest-b"):
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    result = run(cluster, [users], mode="plan", limit=["ctl1", "cn1"], record=False)
    assert result.ok, {n: r.error for n, r in result.nodes.items()}
    ctl = {o.name: o for o in result.nodes["ctl1"].ops}
    ops = {o.name: o for o in result.nodes["cn1"].ops}
    acct = ops["users | local users and groups"]
    assert acct.status == "changed" and "+ user corraltest-a (uid 52341)" in acct.diff
    assert any(c.startswith("useradd -u 52341 -g corraltest-g -s /bin/bash") for c in acct.commands)
    # keys where users log in (a compute node under pam_slurm_adopt), none on the controller
    assert ops["users | SSH keys of corraltest-a"].status == "changed"
    assert "users | SSH keys of corraltest-a" not in ctl and "users | local users and groups" in ctl
    homes = ops[f"users | homes under {tmp_path}/homes"]
    assert homes.status == "changed" and len(homes.commands) == 2
    assert "users | sshd reads /etc/ssh/authorized_keys/%u" in ops
    for name in ("corraltest-a", "corraltest-b"):  # plan changed nothing
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    assert not (tmp_path / "homes").exists() and not Path("/etc/ssh/authorized_keys/corraltest-a").exists()
