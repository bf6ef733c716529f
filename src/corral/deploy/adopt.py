"""adopt: pam_slurm_adopt on compute nodes (identity.pam_slurm_adopt): a user may SSH to a compute node
only while they have a job there, and the session joins the job's extern step (its cgroups, its accounting,
its end). render/adopt.py holds the PAM text and says what Slurm documents and what corral chose.

On: libpam-slurm-adopt, corral's pam_access file (root, ssh.user and identity.adopt_exempt_users, by
name, may log in without a job), /etc/cron.allow and /etc/at.allow naming the same users (a crontab or an at
job of anyone else would run outside every job), and corral's blocks in /etc/pam.d/sshd; slurm.conf's PrologFlags=Contain comes with the controller's configuration
(render/slurm.py), which an apply writes before this deploy runs. Off (or a node that is also a login node,
where users log in without a job): corral's blocks leave /etc/pam.d/sshd, which is then as it was, and the
access file goes; the package stays (nothing loads it). A change affects new SSH logins only.
"""

from __future__ import annotations

import hashlib
import io

from pyinfra import host
from pyinfra.api import FileUploadCommand, deploy, operation
from pyinfra.facts.files import FileContents

from corral.components.slurm import ADOPT
from corral.components import gates
from corral.deploy import operations
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, snapshot
from corral.engine.notes import annotate
from corral.engine.shell import cmd
from corral.render.adopt import (ACCESS_FILE, AT_ALLOW, COMMON_SESSION, CRON_ALLOW, EMPTY_SHA, MODULE, PAM_SSHD,
                                 access_conf, adopt_lines, converged_block_hashes, module_path, restore_lines,
                                 schedulers_allow, text)

PACKAGE = ADOPT
WANT = register(Want(paths=(ACCESS_FILE, CRON_ALLOW, AT_ALLOW), packages=(PACKAGE,), blocks=(PAM_SSHD,)))


@installs(lambda on, **_: {PAM_SSHD: None} if on else {})  # corral's blocks in the node's own file
@operation()
def sshd_pam(on: bool, node: str, want: Want, module: str = MODULE):
    """corral's blocks in /etc/pam.d/sshd (on) or none (off); the rest of the file stays the admin's. The
    node's file is read only when its blocks differ from what corral writes (on: common-session is read to
    know that); it is replaced atomically (a copy with its mode and owner, renamed over it). `module`: the
    path of pam_slurm_adopt.so on the node's release (render/adopt.py module_path)."""
    have = snapshot(want).blocks.get(PAM_SSHD)
    if on:
        session = host.get_fact(FileContents, path=COMMON_SESSION)
        if have in converged_block_hashes(session, node, module):
            host.noop(f"{PAM_SSHD}: pam_slurm_adopt in place")
            return
        lines = host.get_fact(FileContents, path=PAM_SSHD)
        new = text(adopt_lines(lines, session, node, module))
    else:
        if have == EMPTY_SHA:
            host.noop(f"{PAM_SSHD}: no pam_slurm_adopt block")
            return
        lines = host.get_fact(FileContents, path=PAM_SSHD)
        if lines is None:
            host.noop(f"{PAM_SSHD}: not there")
            return
        new = text(restore_lines(lines))
    if new == text(lines):
        host.noop(f"{PAM_SSHD}: pam_slurm_adopt {'in place' if on else 'not there'}")
        return
    annotate(disruption="none", diff=operations._diff(PAM_SSHD, lines, new))
    tmp = f"{PAM_SSHD}.corral-new"
    yield cmd("cp", "-p", PAM_SSHD, tmp)
    stage, staged = operations._staging(PAM_SSHD)
    yield from stage
    yield FileUploadCommand(io.BytesIO(new.encode()), tmp, remote_temp_filename=staged)
    yield cmd("mv", "-f", tmp, PAM_SSHD)


@operation()
def absent(path: str, want: Want, ours: str | None = None):
    """A file corral wrote earlier, removed (`ours`: only while it holds exactly that text; an admin's own
    file of that name stays)."""
    cur = snapshot(want).files.get(path)
    if cur is None:
        host.noop(f"{path} not there")
        return
    if ours is not None and cur.get("sha256") != hashlib.sha256(ours.encode()).hexdigest():
        host.noop(f"{path} is not corral's: left as it is")
        return
    annotate(disruption="none", diff=f"{path}: removed\n")
    yield cmd("rm", "-f", path)


@deploy("pam_slurm_adopt")
def adopt() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.compute(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    on = cluster.spec.identity.pam_slurm_adopt
    if on and "login" in node.roles:
        operations.skip(name="pam_slurm_adopt", reason="a login node too: users log in here without a job")
        on = False
    if on:  # the access file before the PAM line that reads it; off: the PAM line goes first
        operations.packages(name="pam_slurm_adopt installed", names=[PACKAGE], want=WANT, together=True)
        operations.managed_file(name=f"{ACCESS_FILE} (root, ssh.user and identity.adopt_exempt_users log in "
                                     "without a job)", path=ACCESS_FILE,
                                content=access_conf(cluster.spec.ssh.user, cluster.spec.identity.adopt_exempt_users),
                                want=WANT)
        sshd_pam(name=f"{PAM_SSHD}: pam_slurm_adopt, no pam_systemd", on=True, node=node.name, want=WANT,
                 module=module_path(node.os))
    else:
        sshd_pam(name=f"{PAM_SSHD}: no pam_slurm_adopt", on=False, node=node.name, want=WANT)
        absent(name=f"{ACCESS_FILE} removed", path=ACCESS_FILE, want=WANT)
    allow = schedulers_allow(cluster.spec.ssh.user, cluster.spec.identity.adopt_exempt_users)
    for path in (CRON_ALLOW, AT_ALLOW):  # cron and at: no way around the job either
        if on:
            operations.managed_file(name=f"{path} (those who may log in without a job)", path=path, content=allow,
                                    want=WANT)
        else:
            absent(name=f"{path} removed (corral's)", path=path, want=WANT, ours=allow)
