"""corral's operations: compare with the node snapshot, yield commands only for a difference,
say why when there is none, and label every change with its disruption (plan shows it).
"""

from __future__ import annotations

import difflib
import hashlib
import io
import re

from pyinfra import host
from pyinfra.api import FileUploadCommand, operation
from pyinfra.facts.files import FileContents

from corral.deploy.installs import BLOCK, installs
from corral.deploy.nodestate import Want, snapshot
from corral.deploy.package_batch import Batch, batch
from corral.engine.pyinfra_seam import current_deploy_name
from corral.engine.notes import annotate
from corral.engine.shell import AND, OR, Raw, cmd, q
from corral.render import apt
from corral.render.restart import Policy, dropin_path, render_restart_dropin
from corral import paths
from corral.errors import CorralError

APT_MAX_AGE_S = 3600
APT_ENV = Raw("DEBIAN_FRONTEND=noninteractive")
# uploads through sudo (a non-root SSH user) are staged here: root-made, 0700 and owned by that user,
# so no other user can read a secret between the upload and its `sudo cp` (pyinfra's default is /tmp)
STAGE_DIR = paths.STAGE_DIR


def _missing(names: list[str], installed: dict[str, str]) -> list[str]:
    """`name` is satisfied by any installed version, `name=version` by exactly that version."""
    out = []
    for n in names:
        name, _, version = n.partition("=")
        if name not in installed or (version and installed[name] != version):
            out.append(n)
    return out


def _declared(names: list[str]) -> None:
    """A component installs only what its declaration says it may (components/): else the bundle, its
    coverage and the virtual repository, which read the declarations, would lack the package. A deploy
    no declaration names (a test's) is not checked."""
    from corral.components.views import by_name, may_install
    cluster, node = getattr(host.data, "corral_cluster", None), getattr(host.data, "corral_node", None)
    deploy_name = current_deploy_name(host)
    if cluster is None or deploy_name is None or by_name(cluster, deploy_name) is None:
        return
    undeclared = sorted({n.partition("=")[0] for n in names} - may_install(cluster, node, deploy_name))
    if undeclared:
        raise CorralError(f"deploy {deploy_name!r} installs {', '.join(undeclared)} on {node.name}, which its "
                          "declaration does not list: the bundle and the virtual repository would lack it",
                          value=deploy_name, fix="add it to the component's packages or vendor (components/)")


def packages(*, names: list[str], want: Want, together: bool = False, **kwargs):
    """Install the Debian packages that are missing or (`name=version`) at another version.
    together=True: packages from a repository the node has before the run (Debian's, corral's
    local one): they go in the node's one transaction (deploy/package_batch.py), which installs them
    before this op runs; this op then says so and runs nothing (alone, as in a run without that deploy,
    it installs them itself)."""
    _declared(names)
    books = batch() if together else None
    if books is not None:
        books.want(names)
    return package_install(names=names, want=want, together=books, **kwargs)


@operation()
def package_install(names: list[str], want: Want, disruption: str = "none", together: Batch | None = None):
    """(apt cache refreshed first if older than 1 h)"""
    snap = snapshot(want)
    missing = _missing(names, snap.packages)
    if not missing:
        host.noop(f"packages installed: {', '.join(names)}")
        return
    if together is not None and together.covers(missing):
        host.noop(f"packages installed with the node's others in one transaction: {', '.join(missing)}")
        return
    annotate(disruption=disruption)
    yield from apt_install(missing, snap.apt_lists_age_s)


def apt_install(missing: list[str], lists_age_s: int | None, guard: list | tuple = ()) -> list:
    """The commands that install `missing`: dpkg finished first, the lists refreshed when older than an
    hour, then one `apt-get install` (`guard`: shell put before it in the same command)."""
    commands = [Raw(apt.CONFIGURE)]  # dpkg finished first (render/apt.py)
    if lists_age_s is None or lists_age_s > APT_MAX_AGE_S:
        commands += [cmd(APT_ENV, "apt-get", "update", "-q"),
                     cmd("touch", "/var/lib/apt/periodic/update-success-stamp", Raw("2>/dev/null"), OR, "true")]
    install = Raw(apt.install_script(missing, downgrade=any("=" in n for n in missing), confold=True))  # the one apt-get install
    # lists younger than an hour can still miss a package the repository gained since: refresh, retry
    return commands + [cmd(*guard, install, OR, Raw("{"), APT_ENV, "apt-get", "update", "-q", AND, install,
                           Raw(";"), Raw("}"))]


@operation()
def directory(path: str, want: Want, mode: str = "755", user: str = "root", group: str = "root"):
    cur = snapshot(want).files.get(path)
    if cur and cur["kind"] == "dir" and (cur["mode"], cur["user"], cur["group"]) == (mode, user, group):
        host.noop(f"directory {path} in place")
        return
    annotate(disruption="none")
    yield cmd("install", "-d", "-m", mode, "-o", user, "-g", group, path)


def _diff(path: str, old: list[str] | None, new: str) -> str:
    before = [line + "\n" for line in old] if old else []
    return "".join(difflib.unified_diff(before, new.splitlines(keepends=True),
                                        fromfile=f"{path} (node)", tofile=f"{path} (spec)"))


def mask_diff(diff: str, values: tuple[str, ...] = (), keys: tuple[str, ...] = ()) -> str:
    """Hide secrets in a diff: each value in `values` (e.g. the password corral writes), and the value
    of every `Key=value` line whose key is in `keys`, old (the node's) and new alike."""
    for value in values:
        if value:
            diff = diff.replace(value, "********")
    for key in keys:
        diff = re.sub(rf"(?m)^([-+ ]?\s*{re.escape(key)}\s*=).*$", r"\1********", diff)
    return diff


def _staging(path: str, user: str | None = None) -> tuple[list, str | None]:
    """Through sudo, pyinfra uploads as the SSH user to a temp file, then `sudo cp`s it: give it a
    name in corral's private staging directory (made by root, owned by that user, 0700)."""
    user = user or host.data.get("ssh_user") or "root"
    if user == "root":
        return [], None
    name = hashlib.sha1(path.encode()).hexdigest()
    return [cmd("install", "-d", "-m", "700", "-o", user, STAGE_DIR)], f"{STAGE_DIR}/{name}"


def install_commands(path: str, data: bytes, mode: str, user: str, group: str,
                     validate: str | None = None) -> list:
    """Create a temp file with its final mode and owner, upload into it, (validate it: `validate`
    is a shell command corral wrote, with {} for the file; a failure removes it and leaves `path` as it
    was), rename over `path`. Through sudo the upload is staged in STAGE_DIR (0700), never in /tmp."""
    tmp = f"{path}.corral-new"
    check = ([f"{validate.replace('{}', q(tmp))} || {{ rc=$?; rm -f {q(tmp)}; "  # shell-ok: validate is corral's
              f"echo {q(f'rejected: {path} left as it was')} >&2; exit $rc; }}"] if validate else [])
    stage, staged = _staging(path)
    return [cmd("mkdir", "-p", path.rsplit("/", 1)[0] or "/"), *stage,
            cmd("install", "-m", mode, "-o", user, "-g", group, "/dev/null", tmp),
            FileUploadCommand(io.BytesIO(data), tmp, remote_temp_filename=staged), *check,
            cmd("mv", "-f", tmp, path)]


@installs(lambda path, content, **_: {path: content})
@operation()
def managed_file(path: str, content: str | bytes, want: Want, mode: str = "644", user: str = "root",
                 group: str = "root", disruption: str = "none", secret: bool = False,
                 mask: tuple[str, ...] = (), mask_keys: tuple[str, ...] = (), validate: str | None = None):
    """Install `content` at `path` atomically (created with its final mode and owner, checked with
    `validate` if given, then renamed)."""
    yield from _managed_file(path, content, want, mode, user, group, disruption, secret, mask, mask_keys, validate)


def _managed_file(path: str, content: str | bytes, want: Want, mode: str = "644", user: str = "root",
                  group: str = "root", disruption: str = "none", secret: bool = False,
                  mask: tuple[str, ...] = (), mask_keys: tuple[str, ...] = (), validate: str | None = None):
    """managed_file's commands (none, and its no-op said, when the file is as it should be)."""
    data = content.encode() if isinstance(content, str) else content
    cur = snapshot(want).files.get(path)
    same_content = bool(cur) and cur.get("sha256") == hashlib.sha256(data).hexdigest()
    same_meta = bool(cur) and (cur["mode"], cur["user"], cur["group"]) == (mode.lstrip("0") or "0", user, group)
    if same_content and same_meta:
        host.noop(f"file {path} up to date")
        return
    if not same_content:
        if secret:
            diff = f"{path}: secret content differs (not shown)\n"
        elif cur is None:
            diff = _diff(path, None, data.decode(errors="replace"))
        else:
            diff = _diff(path, host.get_fact(FileContents, path=path), data.decode(errors="replace"))
        diff = mask_diff(diff, mask, mask_keys)
        annotate(disruption=disruption, diff=diff)
        yield from install_commands(path, data, mode, user, group, validate)
    else:
        annotate(disruption="none", diff=f"{path}: mode/owner {cur['mode']} {cur['user']}:{cur['group']}"
                 f" -> {mode} {user}:{group}\n")
        yield cmd("chown", f"{user}:{group}", path)
        yield cmd("chmod", mode, path)


@installs(lambda path, block, **_: {path + BLOCK: block} if block else {})  # "": the block taken away
@operation()
def managed_block(path: str, block: str, want: Want, merge, disruption: str = "none"):
    """Keep corral's marked block in a shared file (e.g. /etc/hosts); the rest stays the admin's.
    `merge(current_text, block) -> new_text`."""
    if snapshot(want).blocks.get(path) == hashlib.sha256(block.encode()).hexdigest():
        host.noop(f"{path}: corral's block up to date")
        return
    lines = host.get_fact(FileContents, path=path) or []
    current = "".join(line + "\n" for line in lines)
    new = merge(current, block)
    if new == current:
        host.noop(f"{path}: corral's block up to date")
        return
    annotate(disruption=disruption, diff=_diff(path, lines, new))
    tmp = f"{path}.corral-new"
    yield cmd("cp", "-p", path, tmp)
    stage, staged = _staging(path)
    yield from stage
    yield FileUploadCommand(io.BytesIO(new.encode()), tmp, remote_temp_filename=staged)
    yield cmd("mv", "-f", tmp, path)


@operation()
def service(unit: str, want: Want, running: bool = True, enabled: bool = True, wait: str | None = None,
            logs: str | None = None, first: tuple[str, str] | None = None):
    """Enabled and running; after a start, wait until `wait` (a shell test) succeeds. `first`: (what, shell
    test) waited for before a start, bounded, going on either way (a backup slurmctld starts once the
    primary serves: started together, the primary's stand-down request to it times out, 30 s)."""
    name = unit
    active, is_enabled = snapshot(want).services.get(name, ("unknown", "unknown"))
    cmds = []
    if enabled and is_enabled not in ("enabled", "static", "alias"):  # a package installed in this run
        # has mostly enabled it already: `enable` (through systemd-sysv-install for units with an init
        # script: ~1 s) only when it still is not
        cmds.append(cmd("systemctl", "is-enabled", "--quiet", name, OR, "systemctl", "enable", name))
    if running and active != "active":  # restart: a package's postinst may have started it with
        # its default config meanwhile; reset-failed first: a daemon that gave up restarting (its start
        # limit, render/restart.py) would refuse this start for the rest of the interval
        cmds.append(cmd("systemctl", "reset-failed", name, Raw("2>/dev/null"), OR, "true"))
        cmds.append(cmd("systemctl", "restart", name))
    if not cmds:
        host.noop(f"service {name} {'running' if running else 'present'} and {is_enabled}")
        return
    annotate(disruption=f"start {name}")
    yield cmd("systemctl", "daemon-reload")
    if first and running and active != "active":
        yield awaited(*first)
    yield from cmds
    if wait and running and active != "active":
        yield readiness(name, wait, logs)


def _after_change(unit: str, want: Want, verb: str, wait: str | None, logs: str | None, started: str):
    """`systemctl <verb>` a daemon after a change, then prove it with `wait`; nothing when it was not
    running before this run (its start in this run came after the change: `started` says so)."""
    if snapshot(want).services.get(unit, ("",))[0] != "active":
        host.noop(f"{unit} was not running before this run; its start {started} the change")
        return
    annotate(disruption=f"{verb} {unit}")
    if verb == "restart":  # a changed unit file or drop-in is read first
        yield cmd("systemctl", "daemon-reload")
    yield cmd("systemctl", verb, unit)
    if wait:
        yield readiness(unit, wait, logs)


@operation()
def restart(unit: str, want: Want, wait: str | None = None, logs: str | None = None):
    """Restart a daemon (used with `_if=<a change>`); then prove it with `wait` (shell test).
    A daemon that was not running before this run was started after the change: no restart."""
    yield from _after_change(unit, want, "restart", wait, logs, "picked up")


@operation()
def reload(unit: str, want: Want, wait: str | None = None, logs: str | None = None):
    """Reload a daemon's configuration (used with `_if=<a change>`); then prove it with `wait`. A daemon
    that was not running before this run was started after the change, which it read: no reload."""
    yield from _after_change(unit, want, "reload", wait, logs, "read")


RELOADED = "none (systemd reloaded)"


@installs(lambda unit, policy=None, **_: {dropin_path(unit): render_restart_dropin(unit, policy)})
@operation()
def restart_policy(unit: str, want: Want, started_next: bool = False, policy: Policy | None = None):
    """systemd restarts `unit` when it dies: corral's drop-in (render/restart.py) installed, then
    `systemctl daemon-reload`, which applies it without restarting the daemon. `want` holds the
    drop-in's path (render.restart.dropin_path), so the one snapshot reads it.
    `started_next`: the deploy's `service` op for this unit comes next; when the daemon is not running
    that op starts it, after its own daemon-reload, so this one is left out (one reload, not two)."""
    yield from _dropin(unit, dropin_path(unit), render_restart_dropin(unit, policy), want, started_next)


@installs(lambda path, content, **_: {path: content})
@operation()
def unit_dropin(unit: str, path: str, content: str, want: Want, started_next: bool = False):
    """Another of corral's drop-ins for `unit` at `path`, applied as restart_policy's: a daemon-reload,
    left to the `service` op that comes next (`started_next`) when the daemon is not running."""
    yield from _dropin(unit, path, content, want, started_next)


def _dropin(unit: str, path: str, content: str, want: Want, started_next: bool):
    commands = list(_managed_file(path, content, want, disruption=RELOADED))
    running = snapshot(want).services.get(unit, ("unknown",))[0] == "active"
    if not commands:
        return
    yield from commands
    if running or not started_next:
        yield cmd("systemctl", "daemon-reload")


@operation()
def skip(reason: str):
    """Nothing to do here, and why (plan lists these: e.g. a component not installable on this node)."""
    host.noop(f"skipped: {reason}")
    return
    yield  # a generator, as pyinfra operations are


@operation()
def run_when_changed(description: str, commands: list[str], disruption: str = "none"):
    """Commands to run when an earlier op changed (`_if=`), e.g. `scontrol reconfigure`."""
    annotate(disruption=disruption)
    yield from commands


def awaited(what: str, test: str, timeout_s: int = 90) -> str:
    """A shell loop: wait until `test` succeeds (every 250 ms), for at most `timeout_s`; after that say
    so on stderr and go on (what comes next does not need it, it goes better with it)."""
    return (f"end=$(( $(date +%s) + {int(timeout_s)} )); until ( {test} ) >/dev/null 2>&1; do "  # shell-ok: test is corral's
            f"if [ $(date +%s) -ge \"$end\" ]; then echo {q(f'{what}: not after {timeout_s} s, going on')} >&2; break; fi; "
            f"sleep 0.25; done")


def readiness(name: str, test: str, logs: str | None, timeout_s: int = 60) -> str:
    """A shell loop: succeed as soon as `test` does (tried every 50 ms for the first 2 s, when most
    daemons become ready, then every 250 ms); after `timeout_s` print the daemon's last log lines, fail."""
    show = logs or f"journalctl -u {q(name)} -n 20 --no-pager"
    now = "$(( $(date +%s%N) / 1000000 ))"  # milliseconds
    return (f"end=$(( $(date +%s%N) / 1000000 + {int(timeout_s) * 1000} )); n=0; "
            f"until ( {test} ) >/dev/null 2>&1; do "  # shell-ok: test is corral's
            f"if [ {now} -ge \"$end\" ]; then echo {q(f'{name} not ready after {timeout_s} s; last log lines:')} >&2; "
            f"( {show} ) >&2; exit 1; fi; n=$((n + 1)); if [ $n -le 40 ]; then sleep 0.05; else sleep 0.25; fi; done")  # shell-ok: logs is corral's
