"""`corral backup`, `corral restore`: module-level commands that main.py registers (COMMANDS); the
work is in corral/backup/. With --json both always print one object (ok: false and the error)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from corral.cli.common import JsonOpt, SpecOpt, err, load_cluster, out, print_json
from corral.errors import CorralError, UsageError

TimeoutOpt = typer.Option(600, "--timeout", min=10, help="seconds each remote step may take")


def _cluster(spec: Optional[Path], as_json: bool):
    """The spec's cluster; a spec error still prints the JSON object with --json (then exits 2)."""
    try:
        return load_cluster(spec)
    except CorralError as exc:
        if as_json:
            print_json({"ok": False, "error": str(exc)})
        raise


def backup(spec: Optional[Path] = SpecOpt, to: Optional[Path] = typer.Option(
               None, "--to", help="directory for the backup file (default: backup.dir, else <state_dir>/backups)"),
           timeout: int = TimeoutOpt, as_json: bool = JsonOpt) -> None:
    """One file (0600) with slurmctld's state, the accounting database and corral's state dir, with a
    manifest and sha256 sums authenticated under the state dir's backup key (secrets/backup.key, never
    in a backup: keep a copy off this host); keeps the newest backup.keep files."""
    from corral.backup.take import take
    result = take(_cluster(spec, as_json), to, timeout=timeout)
    if as_json:
        print_json(result.to_json())
    elif result.ok:
        sizes = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in result.parts.items())
        out.print(f"backup written: {result.file} ({result.bytes / 1e6:.1f} MB: {sizes}) in {result.duration_s:.1f} s",
                  markup=False)
        out.print(f"authenticated with backup key {result.key_id}", markup=False)
        if result.key_made:
            err.print(f"made the backup key {result.key_made}: keep a copy off this host; restoring onto a "
                      "rebuilt control host needs it (`corral restore FILE --key COPY`)", markup=False)
        for p in result.removed:
            out.print(f"removed old backup {p}", markup=False)
    else:
        err.print(f"error: backup failed: {result.error}", markup=False)
    if not result.ok:
        raise typer.Exit(1)


def restore(file: Path = typer.Argument(..., help="a *.corral-backup.tar written by `corral backup`"),
            spec: Optional[Path] = SpecOpt,
            yes: bool = typer.Option(False, "--yes", "-y", help="restore without asking"),
            no_validate: bool = typer.Option(False, "--no-validate", help="do not run validate afterwards"),
            key: Optional[Path] = typer.Option(
                None, "--key", help="the backup key that authenticated FILE (a copy of the old state dir's "
                                    "secrets/backup.key); default: this state dir's"),
            restore_trust: bool = typer.Option(
                False, "--restore-trust", help="also write the backup's trust material the state dir lacks "
                                               "(secrets, known_hosts, SSH keys, the bundle signing key); each "
                                               "file is listed"),
            timeout: int = TimeoutOpt, as_json: bool = JsonOpt) -> None:
    """Put a backup back onto the controller and accounting node (same spec): checks the file
    (authenticated under the backup key, whole) and the nodes first, keeps what was there aside, puts
    it back if a step fails, then validates."""
    from corral.backup.restore import restore as run_restore
    if not file.is_file():  # before the spec and the backup key: the file the user typed is the mistake
        missing = UsageError("no backup file there" if not file.exists() else "not a file", value=str(file),
                             fix="name a *.corral-backup.tar that `corral backup` wrote (it prints where; default "
                                 "dir: backup.dir, else <state_dir>/backups)")
        if as_json:
            print_json({"ok": False, "error": str(missing)})
        raise missing
    cluster = _cluster(spec, as_json)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("restore replaces the cluster's job queue and accounting history and there is no "
                             "terminal to ask on", fix="run `corral restore FILE --yes`")
        if not typer.confirm(f"replace {cluster.name}'s Slurm state and accounting database with {file}?",
                             default=False):
            raise typer.Exit(1)
    say = (lambda line: None) if as_json else (lambda line: err.print(line, markup=False))
    result = run_restore(cluster, file, timeout=timeout, run_validate=not no_validate, key_file=key,
                         restore_trust=restore_trust, say=say)
    if as_json:
        print_json(result.to_json())
    else:
        for name in result.state_restored:
            trust = " (trust material)" if name in result.trust_restored else ""
            out.print(f"state dir: restored {name}{trust}", markup=False)
        for name in result.trust_not_restored:
            out.print(f"state dir: {name} (trust material) not restored; --restore-trust writes it", markup=False)
        for name in result.state_differs:
            out.print(f"state dir: {name} differs from the backup's; kept the current one", markup=False)
        for node, kept in result.kept.items():
            out.print(f"{node}: what was there before is kept at {kept}", markup=False)
        if result.ok:
            out.print(f"restored {file} (taken {result.created}) in {result.duration_s:.1f} s", markup=False)
        else:
            rolled = " (rolled back: the cluster is as it was)" if result.rolled_back else ""
            err.print(f"error: restore failed{rolled}: {result.error}", markup=False)
    if not result.ok:
        raise typer.Exit(1)


COMMANDS = {"backup": backup, "restore": restore}
