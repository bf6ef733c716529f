"""What the notebook hub runs and accepts (node/notebook_slurm.py, installed beside jupyterhub_config.py), with the
settings corral renders: each of batchspawner's verbs becomes sudo, as the user, one of Slurm's commands as an
argv, and nothing a user can write (a job id, a name, a command line planted through batchspawner's API) becomes
a command; a server may tell the hub its port and nothing else (security review 3, N1 and N11)."""

from __future__ import annotations

import json

import pytest

from corral.node import notebook_slurm as slurm
from corral.render import jupyterhub
from tests.unit.test_notebooks import loads

S = json.loads(jupyterhub.settings_json(loads(), "0123456789abcdef"))


def test_each_verb_is_slurms_command_as_the_user_through_sudo():
    assert slurm.argv(" submit", "alice", S) == ["/usr/bin/sudo", "-n", "-u", "alice", "--", "/usr/bin/sbatch",
                                                  "--parsable"]
    assert slurm.argv(" query 1234", "alice", S) == ["/usr/bin/sudo", "-n", "-u", "alice", "--", "/usr/bin/squeue",
                                                      "-h", "-j", "1234", "-o", "%T %B"]
    assert slurm.argv("cancel 1234", "alice", S)[4:] == ["--", "/usr/bin/scancel", "1234"]


@pytest.mark.parametrize(("line", "user"), [
    # batchspawner's defaults and what its API let a server plant (the review's reproduction)
    ("squeue -h -j 12 -o '%T %B'; id > /root/x", "alice"),
    ("runuser -u alice -- scancel 12", "alice"),
    ("query 12; id", "alice"), ("query 12 13", "alice"), ("query $(id)", "alice"), ("query", "alice"),
    ("cancel -1", "alice"), ("cancel 12\nid", "alice"), ("submit --uid=0", "alice"), ("", "alice"),
    # user names a directory may hold (N11) and sudo's own syntax
    ("submit", "bob;id"), ("submit", "o'brien"), ("submit", "root -- /bin/sh"), ("submit", "#0"),
    ("submit", "%sudo"), ("submit", "ALL"), ("submit", "-u"), ("submit", "alice\n"),
])
def test_anything_else_is_refused_and_nothing_is_run(line, user):
    with pytest.raises(ValueError):
        slurm.argv(line, user, S)


def test_a_server_sets_its_port_and_nothing_else():
    assert slurm.port({"port": 48123}) == 48123
    for body in ({"port": 8888, "batch_query_cmd": "id > /root/x"}, {"exec_prefix": "sh -c id"},
                 {"port": "8888"}, {"port": True}, {"port": 80}, {"port": 65536}, {"port": 8888.0}, [8888], None,
                 {"req_username": "root"}, {}):
        with pytest.raises(ValueError):
            slurm.port(body)
