"""One step of a Slurm upgrade (workflows/slurm_upgrade.py) on one node: stop the daemon, pin and
install `slurm.version` (render/slurm_pin.py), start it, wait (bounded) until it answers at that
version. A failure raises StepFailed; the caller decides what stops. `c`: the SlurmControl of the
rollout (workflows/slurm_node.py): its run seam, the controller and the clock."""

from __future__ import annotations

from corral.deploy.slurm import CTL_READY
from corral.engine.shell import q
from corral.facts.slurm import INSTALLED_VERSION, parse_slurm_version
from corral.render import apt
from corral.render.slurm_pin import INSTALLED, PIN, write_script
from corral.spec.slurm_releases import matches
from corral.workflows.node_control import StepFailed, intervals

DBD_TIMEOUT_S = 3600   # slurmdbd converts the accounting database at its first start: long on a big one
CTL_TIMEOUT_S = 600    # slurmctld reads (and converts) its state save files
SLURMD_TIMEOUT_S = 180  # slurmd registered and responding
INSTALL_TIMEOUT_S = 1800
READY = {"slurmdbd": "sacctmgr -n show cluster", "slurmctld": CTL_READY}  # active, not standing by


def install_script(version: str) -> str:
    """The pin, then every installed Slurm package at the pinned version (the daemons stay as the
    caller left them: a policy-rc.d of its own, where none is, keeps the package scripts from
    starting or restarting them; the caller starts them and waits)."""
    return f"""set -u
{write_script(version)} || exit 1
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null 2>&1 || {{ echo 'apt-get update failed' >&2; exit 1; }}
pkgs=$(dpkg-query -W -f '${{db:Status-Abbrev}} ${{Package}}\\n' {INSTALLED} 2>/dev/null | awk '$1 ~ /^.i/ {{print $2}}')
[ -n "$pkgs" ] || {{ echo 'no Slurm package installed' >&2; exit 1; }}
rc=/usr/sbin/policy-rc.d; mine=
[ -e $rc ] || {{ printf '#!/bin/sh\nexit 101\n' > $rc && chmod 755 $rc && mine=1; }}
{apt.install_script(words="$pkgs", confold=True)}; status=$?
[ -n "$mine" ] && rm -f $rc
exit $status
"""


BEFORE = (f"cat {PIN} 2>/dev/null; echo '{'-' * 8}'; dpkg-query -W -f '${{db:Status-Abbrev}} ${{Package}}=${{Version}}\\n' "
          f"{INSTALLED} 2>/dev/null | awk '$1 ~ /^.i/ {{print $2}}'")


def packages_before(c, node: str) -> tuple[str | None, list[str]]:
    """(the pin file's text or None, the installed Slurm packages as name=version): what restore() puts
    back when an install fails part-way."""
    p = c.run(node, BEFORE, 30)
    if p.returncode != 0:
        raise StepFailed("install", f"{node}: could not read the installed Slurm packages (rc={p.returncode}); "
                         "nothing was changed", keep_drained=False)
    pin, _, pkgs = p.stdout.partition("-" * 8 + "\n")
    return (pin or None), [w for w in pkgs.split() if "=" in w]


def pin_back_script(pin: str | None) -> str:
    """The pin file as it was (its text), or none as there was none."""
    return f"printf '%s' {q(pin)} > {PIN}.corral-new && mv -f {PIN}.corral-new {PIN}" if pin else f"rm -f {PIN}"


def restore_script(pin: str | None, pkgs: list[str]) -> str:
    return f"""set -u
{pin_back_script(pin)} || exit 1
export DEBIAN_FRONTEND=noninteractive
dpkg --configure -a >/dev/null 2>&1
rc=/usr/sbin/policy-rc.d; mine=
[ -e $rc ] || {{ printf '#!/bin/sh\nexit 101\n' > $rc && chmod 755 $rc && mine=1; }}
{apt.install_script(pkgs, downgrade=True, confold=True)}; status=$?
[ -n "$mine" ] && rm -f $rc
exit $status
"""


def restore(c, node: str, pin: str | None, pkgs: list[str], daemon: str) -> str:
    """The Slurm packages and pin as they were before a failed install, and `daemon` started again:
    what the node was left as, for the failure's message."""
    if not pkgs:
        return "nothing to put back"
    p = c.run(node, restore_script(pin, pkgs), INSTALL_TIMEOUT_S)
    if p.returncode != 0:
        return (f"the packages from before could not be put back (rc={p.returncode}: "
                f"{(p.stderr or p.stdout).strip()[-160:]}): fix by hand (apt --fix-broken install)")
    started = c.run(node, f"systemctl start {q(daemon)}", 120).returncode == 0
    return f"its Slurm packages put back as they were ({len(pkgs)}), {daemon} " + (
        "started again" if started else "did not start again")


def running_version(c, node: str, binary: str) -> str:
    """`slurmd -V` -> 'slurm 23.02.7' -> '23.02.7' ('' when it does not answer)."""
    p = c.run(node, f"{q(binary)} -V", 30)
    words = p.stdout.split()
    return words[-1] if p.returncode == 0 and words else ""


def install(c, node: str, version: str) -> None:
    p = c.run(node, install_script(version), INSTALL_TIMEOUT_S)
    if p.returncode != 0:
        raise StepFailed("install", f"{node}: rc={p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}",
                         keep_drained=True)
    p = c.run(node, INSTALLED_VERSION, 30)
    found = (parse_slurm_version(p.stdout.splitlines()) if p.returncode == 0 else None) or ""
    if not matches(found or "0.0", version):
        raise StepFailed("install", f"{node}: Slurm {found or 'unknown'} installed, not {version} (is {version} in "
                         "the node's repositories?)", keep_drained=True)


def wait_until(c, check, seconds: float, what: str) -> None:
    deadline, waits = c.clock.monotonic() + seconds, intervals()
    while True:
        if check():
            return
        if c.clock.monotonic() >= deadline:
            raise StepFailed("wait", f"{what} not answering within {int(seconds)} s", keep_drained=True)
        c.clock.sleep(next(waits))


def service(c, node: str, daemon: str, version: str, action: str) -> None:
    p = c.run(node, f"systemctl {q(action)} {q(daemon)}", 120)
    if p.returncode != 0:
        raise StepFailed(action, f"{node}: systemctl {action} {daemon}: {(p.stderr or p.stdout).strip()[-200:]}",
                         keep_drained=True)


def upgrade_daemon(c, node: str, daemon: str, version: str, timeout: float) -> str:
    """slurmdbd or slurmctld on `node`: stop, install, start, wait for it to answer at `version`."""
    service(c, node, daemon, version, "stop")
    install(c, node, version)
    service(c, node, daemon, version, "start")
    on = c.controller if daemon == "slurmdbd" else node  # sacctmgr: a client, asked on the controller
    wait_until(c, lambda: c.run(on, READY[daemon], 30).returncode == 0
               and matches(running_version(c, node, daemon) or "0.0", version), timeout, f"{daemon} on {node}")
    return f"{daemon} {running_version(c, node, daemon)} answering"


def slurmd_responding(c, node: str) -> bool:
    p = c.sc(f"scontrol show node -o {q(node)}", timeout=30)
    state = next((w.split("=", 1)[1] for w in p.stdout.split() if w.startswith("State=")), "")
    return p.returncode == 0 and bool(state) and not any(s in state for s in ("NOT_RESPONDING", "DOWN"))
