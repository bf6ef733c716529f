"""`corral virtual up|down|status|ssh`: the local virtual cluster."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from corral.cli.common import JsonOpt, OsOpt, err, out, print_json
from corral.virtual.defaults import DEFAULT_SUBNET

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_DIR = Path(os.environ.get("CORRAL_VIRTUAL_DIR", "/var/lib/corral/virtual"))
app = typer.Typer(no_args_is_help=True,
                  help="A local virtual cluster of real systemd Debian nodes (GPUs emulated).")
DirOpt = typer.Option(DEFAULT_DIR, "--dir", help="virtual cluster directory (cluster.yaml + .corral/)")


def _table(rows) -> Table:
    from rich.table import Table
    table = Table()
    for col in ("node", "address", "roles", "gpus (emulated)", "state", "ssh"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.name, r.address, ",".join(r.roles), str(r.gpus),
                      f"running (pid {r.pid})" if r.running else "stopped", "ok" if r.ssh else "-")
    return table


@app.command("up")
def up(directory: Path = DirOpt,
       compute: int = typer.Option(2, min=1, max=64, help="compute nodes (new cluster only)"),
       gpus: int = typer.Option(4, min=0, max=16, help="emulated GPUs per compute node (new cluster only)"),
       gpu_model: str = typer.Option("h100", help="emulated GPU model (new cluster only)"),
       subnet: str = typer.Option(str(DEFAULT_SUBNET), help="private subnet for the bridge (new cluster only)"),
       os_name: Optional[str] = OsOpt, as_json: bool = JsonOpt) -> None:
    """Start the virtual cluster (idempotent: starts what is missing)."""
    from corral.workflows.up import start_virtual
    vc, rows = start_virtual(directory, compute=compute, gpus=gpus, gpu_model=gpu_model, subnet=subnet,
                             say=lambda line: err.print(line, markup=False), os_name=os_name)
    if as_json:
        print_json({"ok": True, "spec": str(vc.cluster.path), "nodes": [asdict(r) for r in rows]})
        return
    out.print(_table(rows))
    out.print(f"spec: {vc.cluster.path}\nnext: export CORRAL_SPEC={vc.cluster.path}; corral plan",
              markup=False)


def _vc(directory: Path):
    from corral.virtual.cluster import VirtualCluster
    from corral.spec.loader import load
    return VirtualCluster(load(directory / "cluster.yaml"))


@app.command("down")
def down(directory: Path = DirOpt,
         keep_disks: bool = typer.Option(False, "--keep-disks", help="keep node disks for the next up")) -> None:
    """Stop every node and remove the mounts, cgroups, bridge, server and sysctl changes up made."""
    _vc(directory).down(keep_disks=keep_disks)
    out.print("virtual cluster down", markup=False)


@app.command("status")
def status(directory: Path = DirOpt, as_json: bool = JsonOpt) -> None:
    """Show each virtual node: running, address, SSH."""
    rows = _vc(directory).status()
    if as_json:
        print_json({"ok": all(r.running and r.ssh for r in rows), "nodes": [asdict(r) for r in rows]})
        return
    out.print(_table(rows))
    if not all(r.running and r.ssh for r in rows):
        raise typer.Exit(1)


@app.command("ssh", context_settings={"allow_extra_args": True, "allow_interspersed_args": False})
def ssh(ctx: typer.Context, node: str = typer.Argument(..., help="node name"),
        user: str = typer.Option("root", "--user", "-u", help="log in as this user of the spec (their key: "
                                 ".corral/ssh/users/USER_ed25519)"),
        directory: Path = DirOpt) -> None:
    """Open a shell on a virtual node, or run a command there, as ssh does: `corral virtual ssh NODE CMD...`
    (the words joined with spaces, one command line for the remote shell: `NODE "a; b"`, `NODE ls -l /tmp`).
    After `--` each word reaches the command as one argument, quoted for the remote shell. corral's options
    (--user, --dir) go before NODE or right after it, as ssh's own do; from the command's first word on,
    every option is the command's (`NODE scancel -u alice`)."""
    own, words = split_args(ctx.args)
    user, directory = own.get("user", user), Path(own["dir"]) if "dir" in own else directory
    vc = _vc(directory)
    n = vc.node(node)
    remote = remote_command(words)
    tty = not remote and os.isatty(0)
    cmd = vc.ssh_cmd(n.node.address, *remote, tty=tty, user=user, quiet=False)
    if tty:  # an interactive shell: ssh owns the terminal
        os.execvp(cmd[0], cmd)
    rc, said = _run(cmd)
    if rc == 255 and not said:
        hint = refused_hint(vc.cluster, n.node, user)
        if hint:
            err.print(f"corral: {hint}", markup=False)
    raise typer.Exit(rc)


_OWN = {"--user": "user", "-u": "user", "--dir": "dir"}


def split_args(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """The words after NODE: corral's options right after it (as `ssh HOST -l USER CMD` takes its own), then
    the remote command from its first word that is not one (a leading `--` kept: remote_command reads it)."""
    from corral.errors import UsageError
    own: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        name, eq, value = args[i].partition("=")
        if name not in _OWN:
            raise UsageError(f"{args[i]!r} after the node is not an option of corral virtual ssh", value=args[i],
                             fix="the remote command starts at its first word: NODE CMD ARGS...; or NODE -- CMD")
        if not eq:
            if i + 1 >= len(args):
                raise UsageError(f"{name} needs a value", value=name)
            i, value = i + 1, args[i + 1]
        own[_OWN[name]] = value
        i += 1
    return own, args[i:]


def remote_command(args: list[str]) -> list[str]:
    """ssh's remote command line from the words after NODE: joined with spaces, the remote shell parses
    them (as ssh does); after a leading `--`, each word quoted, so it reaches the command as it is."""
    if args[:1] == ["--"]:
        import shlex
        return [shlex.join(args[1:])] if args[1:] else []
    return [" ".join(args)] if args else []


def said_something(stderr: bytes) -> bool:
    """ssh's stderr held more than its own "Connection closed by ..." (the remote side gave a reason)."""
    lines = stderr.decode(errors="replace").splitlines()
    return any(line.strip() and not line.startswith("Connection closed by ") for line in lines)


def refused_hint(cluster, node, user: str) -> str | None:
    """One line on why `user` was let in nowhere near `node`, for ssh's silent exit 255; None for root
    (never refused: the 255 is the command's own)."""
    if user == "root":
        return None
    from corral.spec.access import users_log_in
    if "compute" in node.roles and "login" not in node.roles and users_log_in(cluster, node):
        return (f"login as {user} refused by {node.name} (pam_slurm_adopt lets users in only where they have "
                f"a job: start one there first, e.g. salloc -w {node.name})")
    if not users_log_in(cluster, node):
        return (f"login as {user} refused by {node.name} (an infrastructure node: the spec's users log in on "
                "login nodes, and on compute nodes with a job there)")
    return f"login as {user} refused by {node.name} (ssh exited 255 and the node said nothing)"


def _run(cmd: list[str]) -> tuple[int, bool]:
    """Run ssh with our stdin and stdout; its stderr passes through as it comes and is kept to tell
    whether the remote side said anything. (exit status, said something)"""
    import subprocess
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    os.set_blocking(fd, True)  # the CLI's gevent makes a Popen's pipes non-blocking; nothing else runs here
    kept = bytearray()
    try:
        while chunk := os.read(fd, 65536):
            os.write(2, chunk)
            kept += chunk
        return proc.wait(), said_something(bytes(kept))
    except KeyboardInterrupt:
        proc.wait()
        return 130, True
    finally:
        proc.stderr.close()
