"""Which operations the pam_slurm_adopt deploy (deploy/adopt.py) prepares on which node (no SSH: preparing
runs no command): compute nodes only; on: package, access file, sshd, cron.allow and at.allow; off, or a compute
node that is also a login node: sshd's blocks, the access file and corral's cron.allow and at.allow go. What each operation does: tests/operations/sshd_pam,
tests/operations/absent."""

from __future__ import annotations

from pyinfra.api import Config, State
from pyinfra.api.deploy import add_deploy

from corral.deploy.adopt import adopt
from corral.engine.inventory import build_inventory
from corral.spec.loader import load_text

SPEC = """\
name: lab
ssh: {user: admin}
nodes:
  - names: ctl
    addresses: [10.0.0.10]
    roles: [controller]
  - names: gpu01
    addresses: [10.0.0.11]
    roles: [compute]
  - names: dev01
    addresses: [10.0.0.12]
    roles: [compute, login]
"""
ON = ["pam_slurm_adopt installed", "/etc/security/corral-adopt.conf (root, ssh.user and identity.adopt_exempt_users log in without a job)",
      "/etc/pam.d/sshd: pam_slurm_adopt, no pam_systemd", "/etc/cron.allow (those who may log in without a job)",
      "/etc/at.allow (those who may log in without a job)"]
OFF = ["/etc/pam.d/sshd: no pam_slurm_adopt", "/etc/security/corral-adopt.conf removed",
       "/etc/cron.allow removed (corral's)", "/etc/at.allow removed (corral's)"]


def _prepared(spec: str, tmp_path) -> dict[str, list[str]]:
    cluster = load_text(spec, str(tmp_path / "cluster.yaml"))
    inventory = build_inventory(cluster)
    state = State(inventory, Config(), check_for_changes=False)
    for host in inventory:
        add_deploy(state, adopt, host=host)
    # each host's own names: pyinfra shares op meta between hosts by position (engine/runner.py name_ops)
    return {host.name: [state.ops[host][h].global_arguments["name"] for h in host.op_hash_order]
            for host in inventory}


def test_on_compute_nodes_only_and_never_where_users_log_in(tmp_path):
    ops = _prepared(SPEC, tmp_path)
    assert ops["ctl"] == []
    assert ops["gpu01"] == ON
    assert ops["dev01"] == ["pam_slurm_adopt", *OFF]  # the skip says why


def test_switched_off_the_blocks_and_the_access_file_go(tmp_path):
    ops = _prepared(SPEC + "identity: {pam_slurm_adopt: false}\n", tmp_path)
    assert ops == {"ctl": [], "gpu01": OFF, "dev01": OFF}
