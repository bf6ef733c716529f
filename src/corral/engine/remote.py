"""One command on one node over the system's OpenSSH client, with the same pinned host keys and
settings as the engine (for checks that read output, e.g. srun/sinfo on the controller)."""

from __future__ import annotations

import os
import shlex
import subprocess
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


def ssh_argv(cluster: Cluster, node: str, command: str, *, timeout: int = 10) -> list[str]:
    cfg = cluster.state_dir / "ssh_config-remote"
    _write_private(cfg, ssh_config_text(cluster, list(cluster.nodes)))  # atomic: ssh runs concurrently
    n = cluster.node(node)
    return ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}",
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
