"""Property tests: for random heterogeneous specs the Slurm files describe exactly the spec.

Hostlists are expanded with python-hostlist (which reads `prefix[lo-hi]` as Slurm does) to check
that every compute node is listed once, with its own address, GPUs and memory.
"""

from __future__ import annotations

import ipaddress
import json

import hostlist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.render import NodeHW, render_cgroup_conf, render_gres_conf, render_slurm_conf
from corral.spec.gpus import GPU_MODELS
from corral.spec.hosts import expand_names
from corral.spec.loader import load_text

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = sorted(GPU_MODELS) + ["zz9"]  # zz9: a model with no known generation


def _ip(i: int) -> str:
    return str(ipaddress.IPv4Address("10.0.0.0") + i)


@st.composite
def clusters(draw):
    """(spec dict, compute group order can be reversed, hw facts for some compute nodes)."""
    addr = [300 + draw(st.integers(0, 300))]  # cursor over 10.0.x.y; runs may cross a .255
    numbers: dict[str, int] = {}
    widths: dict[str, int] = {}

    def names_and_addresses(prefix: str, size: int) -> tuple[str, list[str] | str]:
        width = widths.setdefault(prefix, draw(st.sampled_from([0, 2, 3])))
        start = numbers.get(prefix, draw(st.integers(0, 120)))
        gaps = draw(st.booleans())
        nums = [start + i * (2 if gaps else 1) for i in range(size)]
        numbers[prefix] = nums[-1] + 1 + draw(st.integers(0, 3))
        fmt = (lambda n: f"{n:0{width}d}") if width else str
        names = (f"{prefix}[{fmt(nums[0])}-{fmt(nums[-1])}]" if size > 1 else f"{prefix}{fmt(nums[0])}") \
            if not gaps else ",".join(f"{prefix}{fmt(n)}" for n in nums)
        first = addr[0] + draw(st.integers(1, 3))
        ints = list(range(first, first + 2 * size))
        addr[0] = ints[-1] + 1
        if draw(st.booleans()):
            return names, f"{_ip(ints[0])}-{_ip(ints[size - 1])}"
        return names, [_ip(i) for i in draw(st.permutations(ints))[:size]]

    n_ctl = draw(st.integers(1, 2))  # a backup controller; at most one node may have `accounting`
    ctl_names, ctl_addr = names_and_addresses("ctl", n_ctl)
    ctl_roles = ["controller"] + (draw(st.sampled_from([[], ["accounting"], ["accounting", "compute"]]))
                                  if n_ctl == 1 else [])
    groups = [{"names": ctl_names, "addresses": ctl_addr, "roles": ctl_roles}]
    for i in range(draw(st.integers(1, 6))):
        prefix = draw(st.sampled_from(["gpu", "node", "a100-", "cpu", "dgx"]))
        g = {"roles": [draw(st.sampled_from(["compute"] * 4 + ["login"])) if i else "compute"]}
        g["names"], g["addresses"] = names_and_addresses(prefix, draw(st.integers(1, 24)))
        if draw(st.booleans()):
            g["gpus"] = {"model": draw(st.sampled_from(MODELS)), "count": draw(st.integers(0, 8)),
                         "nvlink": draw(st.booleans())}
            if g["gpus"]["model"] not in GPU_MODELS:
                g["gpus"]["model_unknown_ok"] = True  # else refused as a likely typo (spec/rules_gpus.py)
        if draw(st.booleans()):
            g["memory_mb"] = draw(st.integers(64, 2_000_000))
        if draw(st.booleans()):
            node = draw(st.sampled_from(expand_names(g["names"])))
            o = draw(st.sampled_from([{"address": _ip(addr[0] + 5)}, {"memory_mb": 4096},
                                      {"gpus": {"model": "h100", "count": draw(st.integers(0, 8))}}]))
            addr[0] += 10
            g["overrides"] = {node: o}
        groups.append(g)
    spec = {"name": "prop", "nodes": groups}
    if draw(st.booleans()):
        spec["virtual"] = {"subnet": "10.0.0.0/8", "node_memory_mb": draw(st.integers(256, 8192))}
    spec["slurm"] = {"gres_autodetect": draw(st.sampled_from(["off", "nvml"])),
                     "qos": [{"name": "normal"}, {"name": "high", "preempt": ["normal"]}]}
    if n_ctl == 2:  # a backup controller: the state on shared storage of both (spec/rules_ha.py)
        spec["storage"] = {"mounts": [{"path": "/srv/slurmctld-state", "server": "nas1", "export": "/export/state",
                                       "roles": ["controller"]}]}
        spec["slurm"]["state_save_location"] = "/srv/slurmctld-state"
    return spec, draw(st.randoms(use_true_random=False))


def _load(spec: dict):
    cluster = load_text(json.dumps(spec), "cluster.yaml")
    return cluster, sorted(n.name for n in cluster.with_role("compute"))


def _add_partitions(spec: dict, compute: list[str], rnd) -> dict:
    parts = []
    for i in range(rnd.randint(0, 3)):
        nodes = "ALL" if rnd.random() < 0.3 else ",".join(rnd.sample(compute, rnd.randint(1, len(compute))))
        parts.append({"name": f"p{i}", "nodes": nodes})
    if parts and rnd.random() < 0.5:
        parts[rnd.randrange(len(parts))]["default"] = True
    return {**spec, "slurm": {**spec["slurm"], "partitions": parts}}


def _lines(text: str, first: str) -> list[dict[str, str]]:
    return [dict(w.split("=", 1) for w in ln.split())
            for ln in text.splitlines() if ln.startswith(first + "=")]


@PROPS
@given(clusters())
def test_slurm_files_describe_exactly_the_spec(case):
    spec, rnd = case
    cluster, compute = _load(spec)
    spec = _add_partitions(spec, compute, rnd)
    cluster, _ = _load(spec)
    nodes = {n.name: n for n in cluster.with_role("compute")}
    hw = {}
    for name in rnd.sample(compute, rnd.randint(0, len(compute))):
        s, c, t = rnd.randint(1, 4), rnd.randint(1, 64), rnd.choice([1, 2, 4])
        total = rnd.choice([s * c * t, s * c, rnd.randint(1, 512)])  # the last may not add up
        hw[name] = NodeHW(total, s, c, t, rnd.randint(1000, 3_000_000))
    text = render_slurm_conf(cluster, hw)

    seen: list[str] = []
    for line in _lines(text, "NodeName"):
        names, addrs = hostlist.expand_hostlist(line["NodeName"]), hostlist.expand_hostlist(line["NodeAddr"])
        assert len(names) == len(addrs), line
        for name, address in zip(names, addrs):
            node = nodes[name]
            seen.append(name)
            assert address == node.address
            assert line.get("Gres") == (f"gpu:{node.gpus.model}:{node.gpus.count}" if node.gpus else None)
            mem = node.memory_mb or (cluster.spec.virtual.node_memory_mb if cluster.spec.virtual else None) \
                or (hw[name].memory_mb if name in hw else None)
            assert line.get("RealMemory") == (str(mem) if mem else None)
            if name in hw:  # slurmctld refuses CPUs that are neither Sockets*Cores nor *Threads
                h = hw[name]
                cores = h.sockets * h.cores_per_socket
                valid = (cores, cores * h.threads_per_core)
                assert int(line["CPUs"]) == (h.cpus if h.cpus in valid else cores * h.threads_per_core)
            else:
                assert "CPUs" not in line
    assert sorted(seen) == compute  # every compute node exactly once, nothing else

    parts = _lines(text, "PartitionName")
    assert sum(p.get("Default") == "YES" for p in parts) == 1
    want = {p.name: (set(compute) if p.nodes == "ALL" else set(expand_names(p.nodes)))
            for p in cluster.spec.slurm.partitions} or {parts[0]["PartitionName"]: set(compute)}
    for p in parts:
        assert set(hostlist.expand_hostlist(p["Nodes"])) == want[p["PartitionName"]] <= set(compute)
        assert int(p["DefMemPerCPU"]) >= 1
    for line in text.splitlines():
        if line.startswith("DefMemPer"):
            assert int(line.split("=")[1]) >= 1

    gres = render_gres_conf(cluster)
    nvml = cluster.spec.slurm.gres_autodetect == "nvml"
    gpu_seen = []
    for line in _lines(gres, "NodeName"):
        for name in hostlist.expand_hostlist(line["NodeName"]):
            gpus = nodes[name].gpus
            gpu_seen.append(name)
            assert line["Type"] == gpus.model
            count = int(line["Count"]) if nvml else len(hostlist.expand_hostlist(line["File"]))
            assert count == gpus.count
    assert sorted(gpu_seen) == sorted(n for n in compute if nodes[n].gpus)

    # deterministic, and independent of the order of the node groups in the spec
    flipped = {**spec, "nodes": spec["nodes"][:1] + spec["nodes"][:0:-1]}
    other, _ = _load(flipped)
    assert render_slurm_conf(other, hw) == text == render_slurm_conf(cluster, dict(reversed(hw.items())))
    assert render_gres_conf(other) == gres
    assert render_cgroup_conf(other) == render_cgroup_conf(cluster)


@PROPS
@given(st.lists(st.tuples(st.sampled_from(["gpu", "a100-", "n", "x"]), st.integers(0, 1200),
                          st.sampled_from([0, 1, 2, 3, 4])), min_size=1, max_size=200))
def test_hostlist_names_exactly_the_names(items):
    from corral.render.hw import hostlist as compress
    names = {f"{p}{n:0{w}d}" if w else f"{p}{n}" for p, n, w in items} | {"login"}
    assert sorted(hostlist.expand_hostlist(compress(names))) == sorted(names)
