"""`corral restore FILE`: put a backup back onto the cluster's (freshly installed) controller.

Order: the file is checked authentic and whole (key, cluster name, every checksum) and the nodes ready
(Slurm installed and not older than the backup's, MariaDB up) before anything changes. Then:
slurmctld (every controller) and slurmdbd stop; the current database and the StateSaveLocation's
contents are kept aside on their nodes (backup/state_dir.py: the directory stays, it may be a shared
mount); the backup's are put in place; slurmdbd and slurmctld start; validate runs. If any
step fails, the kept copies are put back and the daemons started again: the cluster is as it was.
The file must be authenticated under the backup key (backup/auth.py): the state dir's, or the copy
the operator kept (`key_file`) when the control host was rebuilt. Even so, its SQL is fed to
`mysql --sandbox` (no `\\!` shell, `\\.` source, `\\T` tee in it). Missing records of corral's state
dir are written back; its trust material (secrets, host keys, SSH keys) only with `restore_trust`,
each file listed; differing ones are kept and reported.
"""

from __future__ import annotations

import datetime
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from corral.backup import archive, auth, local_state, rotation
from corral.backup.state_dir import keep_command, put_back_command, ready_command, unpack_command
from corral.backup.take import DB_PART, LOCAL_PART, STATE_PART, primary_controller, slurm_version
from corral.deploy.accounting import DB
from corral.engine.remote import run_on, stream
from corral.engine.shell import q
from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.shared import state_save_location

KEEP_DIR = "/var/lib/corral-restore"   # what was there before a restore (0700), named in the result
# the client's sandbox (MariaDB >= 10.5.25, 10.6.18, 10.11.8; Debian 12 has 10.11): a client command
# that reaches the system (\! shell, \. source, \T tee, \P with a pager) is an error that stops the load
def load_command(db: str) -> str:
    return f"mysql --sandbox {q(db)}"


LOAD_DB = load_command(DB)
SANDBOX_CHECK = "mysql --sandbox -e 'SELECT 1' >/dev/null"
WAIT_DBD = "for i in $(seq 60); do ss -ltn | grep -q ':6819 ' && exit 0; sleep 1; done; exit 1"
WAIT_CTLD = "for i in $(seq 60); do scontrol ping 2>/dev/null | grep -q 'is UP' && exit 0; sleep 1; done; exit 1"
# the compute nodes register again with the restarted slurmctld (UNKNOWN or '*' until then); bounded,
# and not an error: validate names a node that does not come back
WAIT_NODES = ("for i in $(seq 90); do sinfo -h -N -o '%T' | grep -qiE 'unknown|[*]' || exit 0; sleep 1; done; "
              "exit 0")


@dataclass
class RestoreResult:
    cluster: str
    file: str
    ok: bool = False
    created: str = ""
    steps: list[dict] = field(default_factory=list)
    state_restored: list[str] = field(default_factory=list)
    state_differs: list[str] = field(default_factory=list)
    trust_restored: list[str] = field(default_factory=list)     # secrets, host keys written (restore_trust)
    trust_not_restored: list[str] = field(default_factory=list)  # missing here, left out without restore_trust
    kept: dict[str, str] = field(default_factory=dict)   # node -> what was there before, kept aside
    rolled_back: bool = False
    validate: dict | None = None
    duration_s: float = 0.0
    error: str | None = None

    def to_json(self) -> dict:
        return {"cluster": self.cluster, "file": self.file, "ok": self.ok, "created": self.created,
                "steps": self.steps, "state_restored": self.state_restored, "state_differs": self.state_differs,
                "trust_restored": self.trust_restored, "trust_not_restored": self.trust_not_restored,
                "kept": self.kept, "rolled_back": self.rolled_back, "validate": self.validate,
                "duration_s": round(self.duration_s, 1), "error": self.error}


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for word in text.split(".")[:2]:
        digits = "".join(ch for ch in word if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


class _Steps:
    """Runs and records the node steps; `undo` holds how to put back what was changed."""

    def __init__(self, cluster: Cluster, result: RestoreResult, timeout: float, say: Callable[[str], None]):
        self.cluster, self.result, self.timeout, self.say = cluster, result, timeout, say
        self.undo: list[tuple[str, str, str]] = []

    def run(self, what: str, node: str, command: str, *, stdin: Path | None = None) -> None:
        self.say(f"{node}: {what}")
        t = time.monotonic()
        try:
            if stdin is not None:
                stream(self.cluster, node, command, stdin=stdin, timeout=self.timeout)
            else:  # bash: the steps use pipefail, which sh (dash) lacks under sudo for a non-root ssh.user
                run_on(self.cluster, node, f"bash -o pipefail -c {shlex.quote(command)}", timeout=self.timeout,
                       check=True)
        except CorralError as exc:
            self.result.steps.append({"node": node, "step": what, "ok": False, "error": str(exc)})
            raise
        self.result.steps.append({"node": node, "step": what, "ok": True, "s": round(time.monotonic() - t, 1)})

    def rollback(self) -> None:
        self.say("restore failed: putting back what was there")
        for what, node, command in reversed(self.undo):
            try:
                self.run(f"undo: {what}", node, command)
            except CorralError:
                pass  # recorded in steps; the remaining undo steps still run
        self.result.rolled_back = True


def _preflight(cluster: Cluster, manifest: archive.Manifest, parts: dict[str, Path], controller: str,
               acct: str, timeout: float) -> None:
    have = slurm_version(cluster, controller)
    if manifest.slurm_version and version_tuple(have) < version_tuple(manifest.slurm_version):
        raise CorralError(f"the backup was written by Slurm {manifest.slurm_version}; {controller} has {have}, "
                          "which cannot read newer state files", where=controller,
                          fix="install the same or a newer Slurm on the controller, then restore")
    run_on(cluster, controller, ready_command(state_save_location(cluster)), timeout=timeout, check=True)
    if acct and DB_PART in parts:
        run_on(cluster, acct, "systemctl is-active --quiet mariadb && command -v mysql >/dev/null",
               timeout=timeout, check=True)
        if run_on(cluster, acct, SANDBOX_CHECK, timeout=timeout).returncode != 0:
            raise CorralError("the MariaDB client there has no --sandbox, which restore feeds the backup's SQL to",
                              where=acct, fix="upgrade MariaDB (10.11.8 or newer: Debian 12's current update)")


def restore(cluster: Cluster, file: Path, *, timeout: float = 600, run_validate: bool = True,
            key_file: Path | None = None, restore_trust: bool = False,
            say: Callable[[str], None] = lambda line: None) -> RestoreResult:
    result = RestoreResult(cluster.name, str(file))
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="corral-restore-") as tmp:
            key = auth.load_key(cluster.state_dir, key_file)
            manifest, parts = archive.verify(Path(file), cluster.name, Path(tmp), key)
            result.created = manifest.created
            _restore(cluster, manifest, parts, timeout, run_validate, restore_trust, say, result)
    except CorralError as exc:
        result.error = str(exc)
    finally:
        result.duration_s = time.monotonic() - start
    return result


def _restore(cluster: Cluster, manifest: archive.Manifest, parts: dict[str, Path], timeout: float,
             run_validate: bool, restore_trust: bool, say: Callable[[str], None], result: RestoreResult) -> None:
    controller = primary_controller(cluster)
    controllers = [n.name for n in cluster.with_role("controller")]
    acct = next((n.name for n in cluster.with_role("accounting")), "")
    if DB_PART in parts and not acct:
        say("warning: the backup holds an accounting database but the spec has no accounting node; not restored")
    try:
        _preflight(cluster, manifest, parts, controller, acct, timeout)
    except CorralError as exc:
        raise CorralError(f"the cluster is not ready for a restore: {exc}",
                          fix="run `corral apply` so the controller and accounting node are installed, "
                              "then restore") from None
    if LOCAL_PART in parts:
        written, result.trust_not_restored = local_state.restore_missing(parts[LOCAL_PART], cluster.state_dir,
                                                                         trust=restore_trust)
        result.state_restored = written
        result.trust_restored = [n for n in written if local_state.kind(n) == "trust"]
        _, result.state_differs, _ = local_state.compare_state(parts[LOCAL_PART], cluster.state_dir)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime(rotation.STAMP)
    steps = _Steps(cluster, result, timeout, say)
    state, kept_state = state_save_location(cluster), f"{KEEP_DIR}/slurmctld-{stamp}"
    kept_db = f"{KEEP_DIR}/{DB}-{stamp}.sql.gz"
    with_db = bool(acct and DB_PART in parts)
    try:
        for c in controllers:
            steps.undo.append(("start slurmctld", c, "systemctl start slurmctld"))
            steps.run("stop slurmctld", c, "systemctl stop slurmctld")
        if with_db:
            steps.undo.append(("start slurmdbd", acct, f"systemctl start slurmdbd && {WAIT_DBD}"))
            steps.run("stop slurmdbd", acct, "systemctl stop slurmdbd")
            steps.run(f"keep the current database as {kept_db}", acct,
                      f"umask 077; install -d -m 700 {KEEP_DIR} && set -o pipefail && "
                      f"mysqldump --single-transaction --quick --routines --triggers {DB} | gzip -c > {kept_db}")
            result.kept[acct] = kept_db
            steps.undo.append(("put the previous database back", acct,
                               f"mysql -e 'DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}' && "
                               f"set -o pipefail && gunzip -c {kept_db} | {LOAD_DB}"))
            steps.run("empty the database", acct, f"mysql -e 'DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}'")
            steps.run("load the backup's database", acct, f"gunzip -c | {LOAD_DB}", stdin=parts[DB_PART])
        steps.run(f"keep the current state dir as {kept_state}", controller, keep_command(state, kept_state, KEEP_DIR))
        result.kept[controller] = kept_state if controller not in result.kept else \
            f"{result.kept[controller]}, {kept_state}"
        steps.undo.append(("put the previous state dir back", controller, put_back_command(state, kept_state)))
        steps.run(f"unpack the backup's state dir into {state}", controller, unpack_command(state),
                  stdin=parts[STATE_PART])
        if with_db:
            steps.run("start slurmdbd", acct, f"systemctl start slurmdbd && {WAIT_DBD}")
        for c in controllers:
            # the primary then asks every slurmd to register again (reconfigure) rather than waiting for
            # its next ping (SlurmdTimeout/3: up to 100 s), e.g. nodes that followed a backup controller
            steps.run("start slurmctld", c, "systemctl start slurmctld" +
                      (f" && {WAIT_CTLD} && scontrol reconfigure" if c == controller else ""))
    except CorralError:
        steps.rollback()
        raise
    try:  # restored and running: from here on nothing is undone; validate names a node that stays away
        steps.run("wait for the compute nodes to register", controller, WAIT_NODES)
    except CorralError:
        pass
    if run_validate:
        from corral.checks.validate import validate
        say("validate")
        report = validate(cluster, timeout_s=min(int(timeout), 120))
        result.validate = report.to_json()
        if not report.ok:
            raise CorralError("restored, but validate fails: " + "; ".join(report.failures),
                              fix="see `corral validate`; the previous state is kept on the nodes (kept)")
    result.ok = True
