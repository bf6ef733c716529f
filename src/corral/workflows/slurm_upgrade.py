"""The Slurm upgrade, declared (`SLURM`) for workflows/node_rollout.py: `slurm.version` differs from what the nodes run (deploy/slurm_version.py hands
them over), carried out after every other component and rollout, in the order Slurm's Upgrade Guide
gives (https://slurm.schedmd.com/upgrades.html; the release notes: "If using the slurmdbd ... you
must update this first"):

  1. `corral backup` (backup/take.py, passed in by the CLI): a failed backup stops everything;
  2. slurmdbd on the accounting node: stop, install, start, wait until it answers
     (`sacctmgr show cluster`, bounded by DBD_TIMEOUT_S: the first start converts the database);
  3. slurmctld on every controller: all stopped (the backup controllers first, so none takes over
     at the old version), installed, the primary started and answering, then the backups;
     login nodes' client tools next;
  4. slurmd on compute nodes under the rollout policy (workflows/batches.py): drain, wait for jobs,
     stop slurmd, install, start, `slurmd -V` at the version and the node responding, resume.

Slurm runs slurmd older than slurmctld (within the window), so a stop in step 4 leaves a working
cluster; the result says so. slurmdbd and slurmctld cannot be rolled back (they rewrite the
database and the state files in the new format): a failure in steps 2-3 stops the upgrade with the
daemon as it is and says so; the backup taken in step 1 is the way back (`corral restore` with the
old version installed by hand).
"""

from __future__ import annotations

from corral.deploy.slurm_version import ROLES, UPGRADE
from corral.engine.handoff import SLURM as KIND
from corral.engine.results import OpResult, RunResult
from corral.engine.shell import q
from corral.errors import CorralError
from corral.spec.cluster import Cluster
from corral.spec.hosts import compress_names
from corral.workflows import batches
from corral.workflows.node_rollout import DRAIN, KEEP_DRAINED, RESUME, NodeRollout, NodeRun, Rollout, Step, StepFailed, \
    handoffs
from corral.workflows.slurm_daemons import (CTL_TIMEOUT_S, DBD_TIMEOUT_S, SLURMD_TIMEOUT_S, install, packages_before,
                                            restore, running_version, service, slurmd_responding, upgrade_daemon,
                                            wait_until)

WHAT = "slurm upgrade"
OURS = "corral: slurm upgrade"
NO_ROLLBACK = ("not rolled back: the new {daemon} has converted its {data}, which the old one cannot read; "
               "the backup of this run is the way back (old version installed by hand, then corral restore)")


def _version(cluster: Cluster) -> str:
    """slurm.version: set wherever this rollout runs (deploy/slurm_version.py hands nodes to it only then)."""
    version = cluster.spec.slurm.version
    assert version is not None
    return version


def _from(result: RunResult, nodes: list[str]) -> str:
    return sorted({h.old for h in handoffs(result, KIND, nodes) if h.old} or {"?"})[0]


def order(cluster: Cluster, nodes: list[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(accounting, controllers backups first, login, compute) among `nodes`."""
    def role(r): return [n.name for n in cluster.with_role(r) if n.name in nodes]
    ctl = role("controller")
    compute = role("compute")  # a controller that is also a compute node too: its slurmd restarts there
    return role("accounting"), ctl[1:][::-1] + ctl[:1], [n for n in role("login") if n not in ctl + compute], compute


def planned(cluster: Cluster, result: RunResult, nodes: list[str], policy) -> dict | None:
    if not nodes:
        return None
    dbd, ctl, login, compute = order(cluster, nodes)
    steps = (["backup"] + [f"slurmdbd on {n}" for n in dbd] + [f"slurmctld on {n}" for n in ctl[::-1]]  # started primary first
             + ([f"client tools on {compress_names(login)}"] if login else []))
    entry = batches.planned(WHAT, compute, policy) if compute else {"what": WHAT, "state": "planned", "batches": []}
    entry["summary"] = (f"{_from(result, nodes)} -> {cluster.spec.slurm.version}: {', '.join(steps)}"
                        + (f", then slurmd: {entry['summary']}" if compute else ""))
    return entry


def left_as(r, node: str, daemon: str, step: str, data: str) -> str:
    """What a failed slurmdbd/slurmctld step leaves: before the new version ran, the old daemon is
    started again; after, no rollback (the new one has converted its data)."""
    if step in ("stop", "install", "remote command"):
        try:
            p = r.run(node, f"systemctl start {q(daemon)}", 120)
            back = "started again" if p.returncode == 0 else f"did not start again (rc={p.returncode})"
        except CorralError as exc:
            back = f"could not be started again ({' '.join(str(exc).split())[:160]})"
        return f"the new version never ran; {daemon} on {node} {back}"
    return NO_ROLLBACK.format(daemon=daemon, data=data)


def _fail(result: RunResult, node: str, step: str, message: str) -> None:
    n = result.nodes[node]
    n.ops.append(OpResult(name=f"{WHAT} | {step}", status="failed", reason=message, disruption=UPGRADE))
    n.error, n.error_kind = f"{WHAT}: {step} failed: {message}", "op-failed"


def _ok(result: RunResult, node: str, step: str, reason: str, say) -> None:
    result.nodes[node].ops.append(OpResult(name=f"{WHAT} | {step}", status="changed", reason=reason,
                                           disruption=UPGRADE))
    say(f"node {node}: {WHAT}: {step}: {reason}")


def start(ro: Rollout, result: RunResult, nodes: list[str]) -> bool:
    """Backup, slurmdbd, slurmctld, login nodes' tools, then slurmd in the policy's batches."""
    cluster, say, r, backup = ro.cluster, ro.say, ro.control, ro.env.backup
    version = _version(cluster)
    slurm_nodes = [n.name for n in cluster.nodes if set(n.roles) & set(ROLES)]
    if any(n not in result.nodes for n in slurm_nodes):
        result.warnings.append(f"{WHAT} to {version} not started: this run was limited (--limit); an apply "
                               "without --limit upgrades Slurm")
        return False
    unknown = sorted(n for n in slurm_nodes if not result.nodes[n].ok)
    if unknown:
        result.warnings.append(f"{WHAT} to {version} not started: {compress_names(unknown)} failed or did not answer "
                               "(its Slurm version is unknown or refused); nothing was upgraded")
        return False
    dbd, ctl, login, compute = order(cluster, nodes)
    first = (dbd + ctl + login + compute)[0]
    if backup is None:
        _fail(result, first, "backup", "no backup available in this command (use corral apply); nothing upgraded")
        return False
    taken = backup(cluster)
    if not taken.ok:
        _fail(result, first, "backup", f"{taken.error}; nothing was upgraded")
        return False
    _ok(result, first, "backup", f"taken: {taken.file}", say)
    for group, daemon, data, timeout in ((dbd, "slurmdbd", "database", DBD_TIMEOUT_S),
                                         (ctl, "slurmctld", "state files", CTL_TIMEOUT_S)):
        try:
            if daemon == "slurmctld" and len(group) > 1:
                for node in group:
                    service(r, node, daemon, version, "stop")
            for node in (group[::-1] if daemon == "slurmctld" else group):  # the primary first
                _ok(result, node, daemon, upgrade_daemon(r, node, daemon, version, timeout), say)
        except (StepFailed, CorralError) as exc:
            later = "slurmctld and slurmd" if daemon == "slurmdbd" else "slurmd"
            step = exc.step if isinstance(exc, StepFailed) else "remote command"
            _fail(result, node, daemon, f"{' '.join(str(exc).split())}; {left_as(r, node, daemon, step, data)}"
                  f"; {later} not touched (still at the old version)")
            result.warnings.append(f"{WHAT}: stopped at {daemon} on {node}: fix it by hand before anything else")
            return False
    for node in login:
        try:
            install(r, node, version)
            _ok(result, node, "client tools", f"Slurm {version} installed", say)
        except (StepFailed, CorralError) as exc:
            _fail(result, node, "client tools", " ".join(str(exc).split()))
    done = ro.batches(result, compute) if compute else True
    if not done:
        result.warnings.append(f"{WHAT}: slurmdbd and slurmctld are at {version}; the compute nodes not started "
                               "keep their older slurmd, which Slurm supports: the cluster works; apply again")
    return done


def slurmd(n: NodeRun) -> str:
    """slurmd stopped, Slurm installed at the version, slurmd started and responding. An install that
    fails part-way (a broken package) puts the node's Slurm packages and pin back as they were and starts
    its old slurmd: nothing half-upgraded is left, the node stays drained with the failure."""
    c, name, version = n.control, n.name, _version(n.cluster)
    pin, before = packages_before(c, name)
    service(c, name, "slurmd", version, "stop")
    try:
        install(c, name, version)
    except StepFailed as exc:
        raise StepFailed("install", f"{exc}; {restore(c, name, pin, before, 'slurmd')}", keep_drained=True) from None
    service(c, name, "slurmd", version, "start")
    wait_until(c, lambda: bool(running_version(c, name, "slurmd")) and slurmd_responding(c, name),
               SLURMD_TIMEOUT_S, f"slurmd on {name}")
    return f"slurmd {running_version(c, name, 'slurmd')} responding"


SLURM = NodeRollout(
    kind=KIND, what=WHAT, disruption=UPGRADE,
    steps=(DRAIN, Step("install", slurmd, changes=True), RESUME),
    reason=lambda c: OURS, blame=lambda c: OURS, on_failure=KEEP_DRAINED, whole_cluster="it changes slurmdbd and slurmctld too",
    start=start, plan=planned)
