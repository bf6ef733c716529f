"""`corral doctor`: preflight, changes nothing. Every node reachable with its pinned host key; root
or sudo; a supported OS; free disk and memory; clock offset; the ports its roles will serve free
(or held by the daemon corral runs there); GPUs present as the spec says (PCI, and nvidia-smi where
a driver is present). Facts come from one command per node; `evaluate` is pure."""

from __future__ import annotations

import time

import gevent
from corral.engine.pyinfra_seam import as_host

from corral.checks.doctor_facts import DoctorFacts
from corral.checks.result import Check, Report, summarize
from corral.spec.cluster import Cluster, Node
from corral.spec.gpus import gpu_model

MIN_DISK_MB = {"/": 2048, "/var": 2048, "/tmp": 256}
MIN_MEM_MB = 1024
CLOCK_WARN_S, CLOCK_FAIL_S = 0.5, 2.0
# port -> (role that serves it, the process allowed to hold it already)
PORTS = {6817: ("controller", "slurmctld"), 6818: ("compute", "slurmd"),
         6819: ("accounting", "slurmdbd"), 3306: ("accounting", "mariadbd")}


def gather(cluster: Cluster) -> tuple[dict[str, dict], dict[str, str]]:
    """(facts per reachable node, error per unreachable node), read in parallel."""
    from corral.engine import run
    facts: dict[str, dict] = {}

    def hook(state, hosts) -> None:
        def one(h) -> None:
            with as_host(state, h):
                t0 = time.time()
                data = h.get_fact(DoctorFacts)
                t1 = time.time()
            if data is not None:
                data["clock_offset_s"] = (data["clock"] - (t0 + t1) / 2) if data.get("clock") else None
                data["clock_error_s"] = (t1 - t0) / 2
                facts[h.name] = data
        gevent.joinall([gevent.spawn(one, h) for h in hosts])

    result = run(cluster, [], mode="plan", command="doctor", record=False, prepare=hook)
    errors = {n: (r.error or "unreachable") for n, r in result.nodes.items() if not r.reachable or r.error}
    return facts, errors


def _os(node: Node, f: dict) -> tuple[str, str]:
    """The node's /etc/os-release against its group's `os:` (spec/releases.py): the release it runs is
    the one to write there; a release corral's tests have not run on a live node is a warning."""
    from corral.spec.releases import RELEASES, deployable, from_os_release
    os_id = (f.get("os") or "unknown").split()
    key = (os_id[0], os_id[1] if len(os_id) > 1 else "")
    found = from_os_release(*key)
    known = ", ".join(n for n, r in RELEASES.items() if deployable(r))
    if found is None:
        return "FAIL", f"{' '.join(key)} is not supported (supported: {known})"
    if not deployable(found):
        return "FAIL", (f"runs {found.name}: corral cannot deploy it yet (it installs with {found.family}; corral's "
                        f"package steps are apt's; supported: {known})")
    if found.name != node.os:
        return "FAIL", (f"runs {found.name} ({found.suite}) but the spec says {node.os}: set `os: {found.name}` "
                        f"on its node group (nodes[].os) or reinstall the node")
    if not found.live:
        return "WARN", (f"{found.name} ({found.suite}), as the spec says; not run on a live node by corral's tests "
                        f"(tested live: {', '.join(n for n, r in RELEASES.items() if r.live)})")
    return "OK", f"{found.name} ({found.suite}), as the spec says"


def _privilege(f: dict) -> tuple[str, str]:
    if f.get("uid") == 0:
        return "OK", "root"
    return ("OK", "passwordless sudo") if f.get("sudo") else ("FAIL", "not root and sudo needs a password")


def _resources(f: dict) -> tuple[str, str]:
    low = [f"{p} {f['df'][p]} MB free < {m} MB" for p, m in MIN_DISK_MB.items() if p in f["df"] and f["df"][p] < m]
    total = f["mem"].get("MemTotal", 0)
    if total < MIN_MEM_MB:
        low.append(f"memory {total} MB < {MIN_MEM_MB} MB")
    return ("FAIL", "; ".join(low)) if low else ("OK", f"/ {f['df'].get('/', '?')} MB free, {total} MB memory")


def _clock(f: dict) -> tuple[str, str]:
    off = f.get("clock_offset_s")
    if off is None:
        return "WARN", "clock not read"
    text = f"offset {off:+.3f} s (±{f['clock_error_s']:.3f})"
    if abs(off) - f["clock_error_s"] > CLOCK_FAIL_S:
        return "FAIL", f"{text} > {CLOCK_FAIL_S} s: munge and Slurm need synchronized clocks"
    return ("WARN", f"{text} > {CLOCK_WARN_S} s") if abs(off) > CLOCK_WARN_S else ("OK", text)


def _ports(node: Node, f: dict) -> tuple[str, str]:
    held = dict(f["listen"])
    busy = [f"port {p} held by {held[p] or 'another process'} (needed by {proc})" for p, (role, proc)
            in PORTS.items() if role in node.roles and p in held and held[p] != proc]
    return ("FAIL", "; ".join(busy)) if busy else ("OK", "needed ports free or held by corral's daemons")


def _gpus(node: Node, f: dict) -> tuple[str, str]:
    want = node.gpu_count
    smi, pci = f.get("smi"), f.get("pci", [])
    if smi is not None:
        found, source = len(smi), "nvidia-smi" + (" (emulated)" if f.get("emulated") else "")
        if pci and len(pci) != len(smi):
            return "FAIL", f"PCI shows {len(pci)} NVIDIA GPUs but the driver sees {len(smi)}"
    else:
        found, source = len(pci), "PCI (no driver)"
    if found != want:
        return "FAIL", f"expected {want} GPUs ({node.gpus.model if node.gpus else 'none'}), found {found} ({source})"
    if want and smi and node.gpus is not None:  # GPUs wanted: declared
        model = gpu_model(node.gpus.model)
        token = node.gpus.model.upper()
        wrong = [name for name, _ in smi if token not in name.upper().replace(" ", "")]
        if wrong:
            return "FAIL", f"expected {node.gpus.model} GPUs, found {wrong[0]!r} ({source})"
        mem = node.gpus.memory_gib or (model.memory_gib if model else None)
        got = [m for _, m in smi if m is not None]
        if mem and got and min(got) < mem * 1024 * 0.9:
            return "FAIL", f"expected {mem} GiB per GPU, found {min(got) // 1024} GiB ({source})"
        return "OK", f"{found} x {smi[0][0]} ({source})"
    return "OK", f"{found} GPUs ({source})" if found else "no GPUs, as declared"


def evaluate(cluster: Cluster, facts: dict[str, dict], errors: dict[str, str]) -> Report:
    reach = {n.name: (("FAIL", errors[n.name].removeprefix(f"{n.name}: ")) if n.name in errors else ("OK", "SSH login with the pinned host key"))
             for n in cluster.nodes}
    from corral.spec.rules import scheduler_warnings
    from corral.spec.rules_os import release_warnings
    # the Kubernetes path and the releases not run live: said on every doctor, until they have run live
    unproven = scheduler_warnings(cluster)[:1] + release_warnings(cluster)
    checks = [Check("spec", "WARN" if unproven else "OK", "; ".join([f"{cluster.path}: valid, {len(cluster.nodes)} "
                                                                     "nodes", *unproven])),
              summarize("reachable", reach, f"all {len(cluster.nodes)} nodes reachable")]
    per_check = {"root or sudo": _privilege, "disk and memory": _resources, "clock": _clock}
    nodes = {n.name: n for n in cluster.nodes}
    checks.append(summarize("os", {n: _os(nodes[n], f) for n, f in facts.items()}, "every node runs the release "
                            "its spec names"))
    for name, fn in per_check.items():
        checks.append(summarize(name, {n: fn(f) for n, f in facts.items()}, "ok on every node"))
    checks.append(summarize("ports", {n: _ports(nodes[n], f) for n, f in facts.items()}, "ok on every node"))
    checks.append(summarize("gpus", {n: _gpus(nodes[n], f) for n, f in facts.items()},
                            "GPUs match the spec on every node"))
    if cluster.spec.packages.source == "bundle":
        checks.append(_bundle(cluster, facts))
    return Report(checks)


def _bundle(cluster: Cluster, facts: dict[str, dict] | None = None) -> Check:
    """packages.source: bundle: it verifies against the expected signer, holds what every node needs, and
    was resolved for the release each reachable node runs."""
    from corral.bundle import coverage
    from corral.bundle.serve import bundle_path
    from corral.bundle.verify import expected_fingerprint, verify
    from corral.errors import CorralError
    from corral.spec.rules_bundle import release_of_distribution
    path = bundle_path(cluster)
    checked = verify(path, expected_fingerprint(cluster))
    if not checked.ok:
        return Check("bundle", "FAIL", f"{path}: " + "; ".join(checked.problems[:3]))
    if checked.expected is None:
        return Check("bundle", "FAIL", f"{path}: signed by {checked.fingerprint}, which nothing here vouches for",
                     {"fix": "set packages.fingerprint to the builder's key"})
    try:
        found = coverage.gaps(cluster, checked.manifest or {})
    except CorralError as e:
        return Check("bundle", "FAIL", str(e))
    per_node = {n.name: ("FAIL", "; ".join(found[n.name])) if n.name in found else ("OK", "every package it needs")
                for n in cluster.nodes}
    made_for = (checked.manifest or {}).get("distribution", "")
    rel = release_of_distribution(made_for)
    for name, f in (facts or {}).items():
        runs = tuple((f.get("os") or "unknown").split()[:2])
        if name in per_node and runs != ((rel.distro, rel.version) if rel else None):
            per_node[name] = ("FAIL", f"the bundle was resolved for {made_for or 'an unknown release'}; this node "
                                      f"runs {' '.join(runs)}: its packages were not resolved for it")
    return summarize("bundle", per_node, f"{path.name}: signed by the expected key; holds every package the "
                                         "nodes need")


def doctor(cluster: Cluster) -> Report:
    facts, errors = gather(cluster)
    return evaluate(cluster, facts, errors)
