"""One command on one node over the system's OpenSSH client, with the same pinned host keys and
settings as the engine (for checks that read output, e.g. srun/sinfo on the controller)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from corral.engine.inventory import _write_private, ssh_config_text
from corral.errors import NodeError
from corral.spec.cluster import Cluster


def as_root(cluster: Cluster, command: str) -> str:
    """`command` as root: as it is for root, through passwordless sudo for another SSH user (as the
    engine's pyinfra runs do; corral doctor checks that sudo needs no password)."""
    if cluster.spec.ssh.user == "root":
        return command
    return f"sudo -n -H -- sh -c {shlex.quote(command)}"


_MUX: list[str] = []  # the directory of shared_connections()' sockets while a block runs (process-wide)
MUX_IDLE_S = 30       # a master left behind (corral killed) exits this long after its last session
SOCKET_DIR_MAX = 60   # the sockets' directory: + "/" + %C (40 hex digits) stays under ssh's 108 bytes


@contextmanager
def shared_connections() -> Iterator[None]:
    """Within the block, every command run_on/stream sends to a node reuses one SSH connection to it
    (OpenSSH's ControlMaster): ~0.2 s of key exchange and authentication once per node, not per
    command. The sockets live in a private directory made for the block; at its end each master is
    told to exit and the directory is removed, so no connection outlives the block (a node rebooted
    or recreated later is reached afresh). Nested blocks share the outer one's connections."""
    if _MUX:
        yield
        return
    base = tempfile.gettempdir()
    if len(base) > SOCKET_DIR_MAX - len("/corral-ssh-XXXXXXXX"):
        base = "/tmp"  # a long TMPDIR: ssh refuses a ControlPath of 108 bytes or more, and runs nothing
    path = tempfile.mkdtemp(prefix="corral-ssh-", dir=base)  # 0700
    _MUX.append(path)
    try:
        yield
    finally:
        _MUX.clear()
        for sock in Path(path).iterdir():
            try:
                subprocess.run(["ssh", "-F", "/dev/null", "-o", f"ControlPath={sock}", "-O", "exit", "corral-node"],
                               capture_output=True, timeout=5)
            except subprocess.TimeoutExpired:
                pass  # its ControlPersist ends it
        shutil.rmtree(path, ignore_errors=True)


def _mux_options() -> list[str]:
    if not _MUX:
        return []
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={_MUX[0]}/%C", "-o", f"ControlPersist={MUX_IDLE_S}"]


def ssh_argv(cluster: Cluster, node: str, command: str, *, timeout: int = 10) -> list[str]:
    cfg = cluster.state_dir / "ssh_config-remote"
    _write_private(cfg, ssh_config_text(cluster, list(cluster.nodes)))  # atomic: ssh runs concurrently
    n = cluster.node(node)
    return ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}", *_mux_options(),
            "-o", "LogLevel=ERROR", "-p", str(cluster.spec.ssh.port), n.address, as_root(cluster, command)]


def run_on(cluster: Cluster, node: str, command: str, *, timeout: float = 120,
           check: bool = False, input: str | None = None) -> subprocess.CompletedProcess:
    """Run `command` on `node`; stdin is `input` or closed (srun forwards stdin to task 0)."""
    try:
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        proc = subprocess.run(ssh_argv(cluster, node, command), capture_output=True, text=True,
                              timeout=timeout, **stdin)
    except subprocess.TimeoutExpired:
        raise NodeError(f"command timed out after {timeout:.0f} s", node=node, command=command) from None
    if check and proc.returncode != 0:
        raise NodeError("command failed", node=node, command=command, rc=proc.returncode,
                        stderr_tail="\n".join(proc.stderr.strip().splitlines()[-10:]))
    return proc


def stream(cluster: Cluster, node: str, command: str, *, timeout: float, stdout: Path | None = None,
           stdin: Path | None = None) -> None:
    """Run `command` (under bash -o pipefail) on `node`, its stdout written to the file `stdout` or
    its stdin read from the file `stdin`: bytes go through SSH, nothing is staged on the node.
    Raises NodeError (with stderr's tail) on a failure or after `timeout` seconds."""
    wrapped = f"bash -o pipefail -c {shlex.quote(command)}"
    argv = ssh_argv(cluster, node, wrapped)
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as fin, \
            open(stdout, "wb") if stdout else open(os.devnull, "wb") as fout:
        try:
            proc = subprocess.run(argv, stdin=fin, stdout=fout, stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise NodeError(f"command timed out after {timeout:.0f} s", node=node, command=command) from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-10:]
        raise NodeError("command failed", node=node, command=command, rc=proc.returncode,
                        stderr_tail="\n".join(tail))
