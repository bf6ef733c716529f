"""Accounting sync (corral.deploy.sacct_sync): sacctmgr output -> state -> the commands that converge."""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

import pytest

from corral.deploy.sacct_sync import (
    QUERY_COMMANDS, AcctState, Assoc, QosState, parse_state, plan_sync, wall_minutes,
)
from corral.errors import CorralError, SpecError
from corral.spec.loader import load_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "sacctmgr"
SPEC = (FIXTURES / "cluster.yaml").read_text()


def cluster(text: str = SPEC, **edits: str):
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    return load_text(text, "cluster.yaml")


def outputs(name: str, **extra_lines: str) -> dict[str, str]:
    out = {key: (FIXTURES / name / f"{key}.txt").read_text() for key in QUERY_COMMANDS}
    for key, lines in extra_lines.items():
        out[key] += textwrap.dedent(lines).lstrip("\n")
    return out


def state(name: str, **extra_lines: str) -> AcctState:
    return parse_state(outputs(name, **extra_lines))


# --- reading sacctmgr output ---------------------------------------------------------------------


def test_query_commands_are_parseable_and_read_only():
    for cmd in QUERY_COMMANDS.values():
        argv = shlex.split(cmd)
        assert argv[:3] == ["sacctmgr", "-nP", "show"] and argv[-1].startswith("format=")


def test_parse_fresh_database():
    s = state("fresh")
    assert s.clusters == [] and s.assocs == []
    assert s.qos == {"normal": QosState("normal")}
    assert s.accounts == {"root": ("default root account", "root")}


def test_parse_converged_database():
    s = state("converged")
    assert s.clusters == ["lab"]
    assert s.qos["high"] == QosState("high", 100, None, 10, 240, frozenset({"scavenger"}), "requeue")
    assert s.qos["normal"].max_gpus_per_user == 8 and s.qos["normal"].preempt_mode == "off"
    assert s.qos["scavenger"].max_wall_min == 1440
    assert Assoc("lab", "vision", "", "research", "1", frozenset({"high", "normal"}), "normal") in s.assocs
    assert Assoc("lab", "root", "root", "", "1", frozenset({"normal"}), "") in s.assocs


def test_parse_accepts_outputs_keyed_by_command_and_missing_ones():
    by_cmd = {QUERY_COMMANDS[k]: v for k, v in outputs("converged").items() if k != "accounts"}
    s = parse_state(by_cmd)
    assert s.clusters == ["lab"] and s.accounts == {}
    assert parse_state({}) == AcctState()


def test_parse_other_tres_and_description_with_bar():
    s = parse_state({"qos": "big|5|cpu=64,gres/gpu=2,mem=100G||||cluster\n",
                     "accounts": "a|x|y|org\n"})
    assert s.qos["big"].max_gpus_per_user == 2 and s.qos["big"].priority == 5
    assert s.accounts["a"] == ("x|y", "org")


def test_parse_rejects_wrong_field_count():
    with pytest.raises(CorralError, match="qos output: 3 fields, expected 7"):
        parse_state({"qos": "normal|0|x\n"})


@pytest.mark.parametrize("text,minutes", [
    ("30", 30), ("30:30", 31), ("4:00:00", 240), ("04:00:00", 240), ("2-12", 3600),
    ("1-00:00:00", 1440), ("1-2:3", 1563), ("7-00:00:01", 10081),
    ("", None), (None, None), ("INFINITE", None), ("UNLIMITED", None), ("-1", None),
])
def test_wall_minutes_matches_slurm_time_str2mins(text, minutes):
    assert wall_minutes(text) == minutes


# --- planning ------------------------------------------------------------------------------------


def test_fresh_database_golden():
    plan = plan_sync(cluster(), state("fresh"))
    assert plan.commands == (FIXTURES / "fresh.golden").read_text().splitlines()
    assert plan.extra == []


def test_golden_commands_are_single_shell_words_per_setting():
    for line in (FIXTURES / "fresh.golden").read_text().splitlines():
        argv = shlex.split(line)
        assert argv[:2] == ["sacctmgr", "-i"] and argv[2] in ("add", "modify")


def test_converged_database_needs_nothing():
    plan = plan_sync(cluster(), state("converged"))
    assert plan.commands == [] and plan.extra == []


def test_accepts_the_spec_model_too():
    assert plan_sync(cluster().spec, state("converged")).commands == []


def test_changed_qos_limit_is_one_modify():
    plan = plan_sync(cluster(**{"max_gpus_per_user: 8": "max_gpus_per_user: 4"}), state("converged"))
    assert plan.commands == ["sacctmgr -i modify qos where Name=normal set MaxTRESPerUser=gres/gpu=4"]


def test_limits_removed_from_spec_are_cleared():
    c = cluster(**{'      max_jobs_per_user: 10\n      max_wall: "4:00:00"\n': "",
                   "      preempt: [scavenger]\n      preempt_mode: requeue\n": ""})
    plan = plan_sync(c, state("converged"))
    assert plan.commands == ["sacctmgr -i modify qos where Name=high set MaxJobsPerUser=-1 MaxWall=-1 "
                             "Preempt= PreemptMode=off"]


def test_same_wall_in_another_notation_is_converged():
    assert plan_sync(cluster(**{'"4:00:00"': '"240"'}), state("converged")).commands == []


def test_account_changes_modify_only_what_differs():
    c = cluster(**{"fairshare: 10": "fairshare: 20", "      parent: research\n": "      parent: ops\n"})
    plan = plan_sync(c, state("converged"))
    assert plan.commands == [  # parents first: ops (unchanged), vision, research
        "sacctmgr -i modify account where Name=vision Cluster=lab set Parent=ops",
        "sacctmgr -i modify account where Name=research Cluster=lab set Fairshare=20",
    ]


def test_account_qos_change_reaches_its_users():
    c = cluster(**{"qos: [normal, high]\n": "qos: [normal]\n"})
    plan = plan_sync(c, state("converged"))
    assert plan.commands == [
        "sacctmgr -i modify account where Name=vision Cluster=lab set QOS=normal",
        "sacctmgr -i modify user where Name=alice Account=vision Cluster=lab set QOS=normal",
        "sacctmgr -i modify user where Name=bob Account=vision Cluster=lab set QOS=normal",
    ]


def test_new_user_and_new_account_are_added_in_order():
    c = cluster(**{"users: [carol]": "users: [carol, dave]\n    - name: infra\n      parent: ops\n"
                                      "      users: [erin]"})
    plan = plan_sync(c, state("converged"))
    assert plan.commands == [
        "sacctmgr -i add account Name=infra Cluster=lab Parent=ops Fairshare=1",
        "sacctmgr -i add user Name=dave Account=ops Cluster=lab",
        "sacctmgr -i add user Name=erin Account=infra Cluster=lab",
    ]


def test_extra_database_entries_are_reported_never_deleted():
    s = state("converged",
              qos="long|0|||7-00:00:00||cluster\n",
              accounts="physics|physics|root\nother|only elsewhere|root\n",
              assocs="""
              lab|vision|mallory||1|high,normal|normal
              lab|physics||root|1|normal|
              lab|physics|zoe||1|normal|
              lab|root|admin||1|normal|
              lab2|root|||1|normal|
              lab2|other||root|1|normal|
              lab2|vision|trent||1|normal|
              """)
    plan = plan_sync(cluster(), s)
    assert plan.commands == []
    assert plan.extra == ["qos long", "account physics", "user zoe (account physics)",
                          "user admin (account root)", "user mallory (account vision)"]


def test_user_names_compare_case_insensitively():
    assert plan_sync(cluster(**{"[alice, bob]": "[Alice, bob]"}), state("converged")).commands == []


def test_directory_user_names_are_shell_quoted():
    c = cluster(**{"users: [carol]": "users: [carol, jo.doe@corp, Bob_2]"})
    plan = plan_sync(c, state("converged"))
    assert plan.commands == ["sacctmgr -i add user Name=jo.doe@corp Account=ops Cluster=lab",
                             "sacctmgr -i add user Name=Bob_2 Account=ops Cluster=lab"]


@pytest.mark.parametrize("bad", ["a,b", "o'brien", 'say"hi', " padded", "two words", "tab\there", "",
                                 "o$(id)", "x;rm", "a&b>c", "-rf", "carol\n"])
def test_user_names_sacctmgr_would_mangle_are_refused_by_spec_check(bad):
    with pytest.raises(SpecError, match=r"slurm\.accounts\.\d\.users\.1: not a user name"):
        cluster(**{"users: [carol]": f"users: [carol, {json.dumps(bad)}]"})


def test_missing_cluster_is_added_even_with_associations_elsewhere():
    s = state("converged")
    s.clusters = ["other"]
    assert plan_sync(cluster(), s).commands[0] == "sacctmgr -i add cluster Name=lab"


def test_preempting_an_existing_qos_goes_into_the_add():
    c = cluster(**{"preempt: [scavenger]": "preempt: [normal]"})
    plan = plan_sync(c, state("fresh"))
    assert ("sacctmgr -i add qos Name=high Priority=100 MaxJobsPerUser=10 MaxWall=4:00:00 "
            "Preempt=normal PreemptMode=requeue") in plan.commands
    assert not any("set Preempt=" in cmd for cmd in plan.commands)


# --- users: from the spec's users: and removed by corral -------------------------------------------


def with_users(users_yaml: str):
    return cluster(SPEC + "users:\n" + textwrap.indent(textwrap.dedent(users_yaml).lstrip("\n"), "  "))


def test_parse_default_accounts():
    assert state("converged").default_accounts == {"alice": "vision", "bob": "vision", "carol": "ops",
                                                   "root": "root"}
    with pytest.raises(CorralError, match="users output: 3 fields, expected 2"):
        parse_state({"users": "alice|vision|x\n"})


def test_spec_user_joins_its_accounts_with_its_default_qos():
    c = with_users("""
        - name: dave
          uid: 2004
          accounts: [vision, ops]
          default_qos: high
        """)
    assert plan_sync(c, state("converged")).commands == [
        "sacctmgr -i add user Name=dave Account=vision Cluster=lab QOS=normal,high DefaultQOS=high",
        "sacctmgr -i add user Name=dave Account=ops Cluster=lab DefaultQOS=high",
    ]


def test_first_account_is_the_default_even_when_added_later():
    c = with_users("""
        - name: dave
          uid: 2004
          accounts: [ops, vision]
        """)
    assert plan_sync(c, state("converged")).commands == [  # parents first: vision's add comes first
        "sacctmgr -i add user Name=dave Account=vision Cluster=lab QOS=normal,high DefaultQOS=normal",
        "sacctmgr -i add user Name=dave Account=ops Cluster=lab",
        "sacctmgr -i modify user where Name=dave Cluster=lab set DefaultAccount=ops",
    ]


def test_spec_user_listed_in_an_account_too_is_added_once_and_converges():
    c = with_users("""
        - name: alice
          uid: 2001
          accounts: [vision]
        """)
    plan = plan_sync(c, state("converged"))
    assert plan.commands == [] and plan.extra == []


def test_default_account_and_qos_that_differ_are_modified():
    c = with_users("""
        - name: alice
          uid: 2001
          accounts: [ops, vision]
          default_qos: high
        """)
    assert plan_sync(c, state("converged")).commands == [
        "sacctmgr -i modify user where Name=alice Account=vision Cluster=lab set DefaultQOS=high",
        "sacctmgr -i add user Name=alice Account=ops Cluster=lab DefaultQOS=high",
        "sacctmgr -i modify user where Name=alice Cluster=lab set DefaultAccount=ops",
    ]


def test_removed_user_with_associations_is_the_one_deletion():
    s = state("converged", assocs="lab|vision|mallory||1|high,normal|normal\nlab2|vision|trent||1|normal|\n")
    plan = plan_sync(cluster(), s, removed={"mallory", "trent", "zed"})
    assert plan.commands == ["sacctmgr -i delete user where name=mallory cluster=lab"]
    assert plan.extra == []  # mallory is deleted, not reported; trent is another cluster's; zed has none
    assert shlex.split(plan.commands[0])[:4] == ["sacctmgr", "-i", "delete", "user"]


def test_removed_user_still_listed_by_an_account_is_kept():
    assert plan_sync(cluster(), state("converged"), removed={"bob", "Carol"}).commands == []


@pytest.mark.parametrize("bad", ["a,b", "x y", "o'brien", ""])
def test_removed_names_sacctmgr_would_mangle_are_refused(bad):
    s = state("converged", assocs=f"lab|vision|{bad}||1|normal|\n")
    with pytest.raises(CorralError, match="a removed user's name sacctmgr cannot take"):
        plan_sync(cluster(), s, removed={bad})
