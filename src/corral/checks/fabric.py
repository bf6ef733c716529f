"""`corral validate --fabric`: RDMA bandwidth between node pairs along the topology, each against a floor.

Pairs (`pairs`, pure): two nodes under each leaf (or scalable unit) first, then one node of each leaf with
one of the next leaf (across the spine), at most fabric.max_pairs; without a topology, neighbours in the
spec's order. Each pair runs perftest's ib_write_bw as one Slurm job from the controller (`srun -N2
--exclusive -w A,B`: no user job shares the nodes while it runs; task 0 serves, task 1 connects to A's
cluster address), on each node's first RDMA port of the job environment (render/job_env.py), for
DURATION_S. Its average Gb/s is judged against fabric.ib_write_bw_floor_gbps, else FLOOR_SHARE of the
slower port's link rate. Pairs one at a time: concurrent pairs share the spines they measure.

SKIPPED with the reason on the virtual cluster (no RDMA fabric), with --skip-jobs, and where no compute
node has an active RDMA port. NCCL across nodes is the acceptance checks' (checks/acceptance.py)."""

from __future__ import annotations

import shlex

from corral.checks.fabric_parse import parse_ib_write_bw
from corral.checks.jobs import NAME, Run, not_done
from corral.checks.result import Check, summarize
from corral.errors import CorralError
from corral.render.job_env import rdma_ports

DURATION_S = 10
START_S = 30
FLOOR_SHARE = 0.8
PORT = 18515
VIRTUAL = "virtual cluster: no RDMA fabric to measure (the nodes share one bridge)"


def pairs(cluster, fabric: dict[str, str] | None, limit: int) -> list[tuple[str, str, str]]:
    """(what, node A, node B) along the topology."""
    from corral.render.topology import switches_of
    compute = [n.name for n in cluster.with_role("compute")]
    leaves: list[tuple[str, list[str]]] = []
    t = cluster.spec.topology
    found = switches_of(cluster, fabric) if t is not None and not t.blocks else None
    if found:
        from corral.spec.hosts import expand_names
        leaves = [(s.name, expand_names(s.nodes)) for s in found[0] if s.nodes]
    elif t is not None and t.blocks:
        from corral.spec.hosts import expand_names
        leaves = [(b.name, expand_names(b.nodes)) for b in t.blocks]
    out: list[tuple[str, str, str]] = []
    if not leaves:
        out = [("neighbours", a, b) for a, b in zip(compute[::2], compute[1::2])]
    else:
        out += [(f"within {name}", nodes[0], nodes[1]) for name, nodes in leaves if len(nodes) >= 2]
        out += [(f"across {a[0]} / {b[0]}", a[1][0], b[1][0]) for a, b in zip(leaves, leaves[1:])]
    return out[:limit]


def script(hca_a: str, hca_b: str, address_a: str) -> str:
    q = shlex.quote
    common = f"-F --report_gbits -D {DURATION_S} -p {PORT}"
    return (f'if [ "$SLURM_NODEID" = 0 ]; then exec timeout {DURATION_S + 30} ib_write_bw -d {q(hca_a)} {common}; '
            f"else sleep 2; exec timeout {DURATION_S + 25} ib_write_bw -d {q(hca_b)} {common} {q(address_a)}; fi")


def fabric_checks(cluster, run: Run, ctl: str, hw: dict, fabric: dict[str, str], skipped: dict[str, str],
                  jobs: bool = True) -> tuple[list[Check], dict]:
    spec = cluster.spec.fabric
    why = VIRTUAL if cluster.spec.virtual is not None else "--skip-jobs: read-only run" if not jobs else None
    ports = {n: found for n in hw if (found := rdma_ports(hw[n]))}
    if why is None and not ports:
        why = "no compute node has an active RDMA port (facts: /sys/class/infiniband)"
    if why is not None:
        return [Check("fabric rdma pairs", "SKIPPED", why)], {"pairs": []}
    per_pair: dict[str, tuple[str, str]] = {}
    results = []
    for what, a, b in pairs(cluster, fabric, spec.max_pairs):
        key = f"{a}-{b}"
        if a in skipped or b in skipped or a not in ports or b not in ports:
            reason = skipped.get(a) or skipped.get(b) or f"no active RDMA port on {a if a not in ports else b}"
            per_pair[key] = ("FAIL", f"{what}: not tested ({reason})")
            continue
        (ha, pa, _), (hb, pb, _) = ports[a][0], ports[b][0]
        rate = min(_gbps(hw[a], ha, pa), _gbps(hw[b], hb, pb))
        floor = spec.ib_write_bw_floor_gbps or round(rate * FLOOR_SHARE, 1)
        wait = START_S + DURATION_S + 40
        command = (f"timeout -k 5 {wait} srun -J {NAME} --immediate={START_S} -t 2 -N2 --exclusive -l "
                   f"-w {shlex.quote(a + ',' + b)} bash -c {shlex.quote(script(ha, hb, cluster.node(a).address))}")
        proc = run(ctl, command, timeout=wait + 10)
        entry = {"what": what, "a": a, "b": b, "hca_a": f"{ha}:{pa}", "hca_b": f"{hb}:{pb}", "floor_gbps": floor}
        try:
            got = parse_ib_write_bw("\n".join(ln for ln in proc.stdout.splitlines() if ln.lstrip().startswith("1:")))
        except CorralError:
            per_pair[key] = ("FAIL", f"{what}: {not_done('ib_write_bw', proc, wait)}")
            results.append({**entry, "gbps": None, "status": "FAIL"})
            continue
        ok = got.avg_gbps >= floor
        per_pair[key] = ("OK" if ok else "FAIL", f"{what}: {got.avg_gbps:g} Gb/s {'>=' if ok else '<'} floor {floor:g} "
                                                 f"({ha} -> {hb}, {got.size} B messages)")
        results.append({**entry, "gbps": got.avg_gbps, "status": "OK" if ok else "FAIL"})
    check = summarize("fabric rdma pairs", per_pair, f"{len(per_pair)} pair(s) at or above their floor")
    return [check], {"pairs": results}


def _gbps(hw, hca: str, port: int) -> float:
    for entry in hw.rdma:
        parts = entry.split(":")
        if parts[:2] == [hca, str(port)]:
            return float(parts[4] or 0)
    return 0.0
