"""package upgrades (`packages:`): the spec's apt holds on every node, and on compute nodes the
upgrades `packages.upgrade` asks for, planned from a simulation (facts/apt_upgrades.py) and labelled
for the rollout (workflows/upgrade_rollout.py: drain, wait for jobs, install exactly the planned
versions, reboot when the node asks for it, verify, resume; a failure is rolled back to the old
versions where the repositories still have them). Nothing is upgraded in the components' pass.

Service nodes (controller, accounting, login, monitoring, nfs) are not upgraded by corral: no Slurm
drain protects what runs there; the plan says so.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.deploy import operations
from corral.deploy.nodestate import Want, register, snapshot
from corral.engine.handoff import PACKAGES, Handoff
from corral.engine.notes import annotate
from corral.engine.shell import cmd, q, sh
from corral.facts.apt_upgrades import HOLDS, AptHolds, AptUpgrades, select

UPGRADE = "drain + package upgrade"
SERVICE_ROLES = ("controller", "accounting", "login", "monitoring", "nfs")
WANT = register(Want(paths=(HOLDS,)))


@operation()
def apt_holds(hold: list[str]):
    if not hold and (snapshot(WANT).files.get(HOLDS) or {}).get("kind") != "file":
        host.noop("apt holds: none in the spec, none of corral's on the node")
        return
    held, ours, installed = map(set, host.get_fact(AptHolds, names=" ".join(sorted(set(hold)))))
    want = set(hold) & installed  # a package not installed on this node is not held here
    absent = sorted(set(hold) - installed)
    add, release = sorted(want - held), sorted((ours - want) & held)
    note = f" (not installed here: {', '.join(absent)})" if absent else ""
    if not add and not release and ours == want:
        host.noop(f"apt holds: {', '.join(sorted(want)) or 'none'}{note}")
        return
    annotate(disruption="none", diff="".join(f"hold {p}\n" for p in add) + "".join(f"release {p}\n" for p in release))
    if add:
        yield cmd("apt-mark", "hold", *add)
    if release:
        yield cmd("apt-mark", "unhold", *release)
    if want:
        yield sh(f"mkdir -p /var/lib/corral && printf '%s\\n' {' '.join(q(p) for p in sorted(want))} > {HOLDS}.new "
                 f"&& mv -f {HOLDS}.new {HOLDS}")
    else:
        yield sh(f"mkdir -p /var/lib/corral && : > {HOLDS}.new && mv -f {HOLDS}.new {HOLDS}")


@operation()
def upgrades(kind: str):
    state = host.get_fact(AptUpgrades)
    todo = select(state, kind)
    stale = f" (the package lists could not be refreshed: {state.refresh_failed})" if state.refresh_failed else ""
    if not todo:
        host.noop(f"no package upgrades ({kind}){stale}")
        return
    reboot = state.reboot_required or any(u.name.startswith("linux-image") for u in todo)
    annotate(disruption=UPGRADE, diff="".join(f"{u.name}: {u.old or 'new'} -> {u.new}\n" for u in todo)
             + f"({len(todo)} package(s); drain, wait for jobs, upgrade, "
             + ("reboot, " if reboot else "reboot if the node asks, ") + f"verify, resume){stale}\n",
             rollout=Handoff(PACKAGES))
    yield cmd("echo", f"{len(todo)} package upgrade(s): rolled out after the other components")


@deploy("package upgrades")
def package_upgrades() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    p = cluster.spec.packages
    apt_holds(name="apt holds from the spec", hold=list(p.hold))  # also releases corral's when the spec drops them
    if p.upgrade == "none":
        return
    if "compute" not in node.roles or set(node.roles) & set(SERVICE_ROLES):
        operations.skip(name="apt upgrades", reason="a service node: corral upgrades compute nodes only "
                                                        "(no Slurm drain protects the daemons here)")
        return
    upgrades(name="apt upgrades", kind=p.upgrade)
