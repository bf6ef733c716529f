"""deploy/installs.py: an operation's declaration of the files it installs is recorded, per node, in
the run's context each time the operation is called while a run prepares its deploys."""

from __future__ import annotations

from types import SimpleNamespace

from corral.deploy.installs import installs
from corral.engine import run_context
from corral.engine.pyinfra_seam import on_host

calls = []


@installs(lambda path, content, **_: {path: content})
def write(path: str, content: str, mode: str = "644", secret: bool = False, **pyinfra_arguments):
    calls.append((path, content, mode, secret))
    return "op"


def test_each_call_records_the_nodes_files_and_reaches_the_operation():
    ctx = run_context.RunContext()
    with run_context.active(ctx), on_host(SimpleNamespace(name="gpu01")):
        assert write("/etc/a", "A\n", name="pyinfra's own argument") == "op"
        write(path="/etc/key", content="k", secret=True)
    assert ctx.installs == {"gpu01": {"/etc/a": ("A\n", False), "/etc/key": ("k", True)}}
    assert calls[-2:] == [("/etc/a", "A\n", "644", False), ("/etc/key", "k", "644", True)]


def test_without_a_node_nothing_is_recorded_and_the_operation_still_runs():
    ctx = run_context.RunContext()
    with run_context.active(ctx), on_host(None):
        assert write("/etc/b", "B") == "op" and calls[-1][0] == "/etc/b"
    assert ctx.installs == {}


def test_every_file_writing_operation_declares_what_it_installs():
    """The operations whose files `corral render` must match: each carries its declaration."""
    from corral.deploy import (acceptance, adopt, nvidia_driver, nvidia_tools, operations, slurm, slurm_version, sssd,
                               users)
    ops = [operations.managed_file, operations.managed_block, operations.restart_policy, operations.unit_dropin,
           slurm.controller_config, sssd.sssd_config, users.sshd_dropin, slurm_version.slurm_pin,
           nvidia_tools.ctk_runtime, acceptance.gpu_burn_build, nvidia_driver.driver_version,
           adopt.sshd_pam, sssd.nsswitch, users.accounts]  # the last three: made on the node (content None)
    assert all(getattr(op, "__wrapped__", None) is not None for op in ops)
