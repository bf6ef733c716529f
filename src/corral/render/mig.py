"""MIG, rendered (pure): nvidia-mig-parted's config for a node's layout, the GRES Slurm gets for a
node as its facts found it (whole GPUs + MIG devices), and the difference between the spec's layout
and the node's. Used by render/slurm.py, render/gres.py, deploy/mig.py and workflows/mig_rollout.py."""

from __future__ import annotations

import json
from collections import Counter

from corral.facts.mig import by_gpu
from corral.spec.mig import layout, profile_key
from corral import paths

CONFIG = paths.MIG_CONFIG
SELECTED = "corral"


def mig_parted_config(gpus) -> str:
    """One mig-parted config named `corral`: GPUs with the same profiles share an entry; GPUs
    without profiles run with MIG disabled."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, profiles in (layout(gpus) or {}).items():
        groups.setdefault(tuple(profiles), []).append(index)
    entries = []
    for profiles, devices in sorted(groups.items(), key=lambda kv: kv[1][0]):
        entry: dict = {"devices": devices, "mig-enabled": bool(profiles)}
        if profiles:
            entry["mig-devices"] = dict(sorted(Counter(profiles).items(), key=lambda kv: profile_key(kv[0])))
        entries.append(entry)
    return json.dumps({"version": "v1", "mig-configs": {SELECTED: entries}}, indent=1) + "\n"


def wanted(gpus) -> dict[int, list[str]] | None:
    """GPU -> MIG profiles the spec asks for (GPUs with MIG disabled absent); None: unmanaged."""
    lay = layout(gpus)
    return None if lay is None else {g: p for g, p in lay.items() if p}


def found(facts) -> dict[int, list[str]]:
    return by_gpu(facts.mig) if facts is not None else {}


def differences(gpus, facts) -> list[str]:
    """What differs per GPU, e.g. 'GPU 0: whole -> 3g.40gb+3g.40gb'; [] when the node is as the spec says."""
    want, have = wanted(gpus) or {}, found(facts)
    out = []
    for g in range(gpus.count):
        a, b = have.get(g, []), want.get(g, [])
        if a != b:
            out.append(f"GPU {g}: {'+'.join(a) or 'whole'} -> {'+'.join(b) or 'whole'}")
    return out


def held_back(gpus, facts, outside: bool) -> str | None:
    """Why the mig component leaves a node as it is: the node is outside `apply --rollout-only`'s nodes
    (`outside`) and its MIG devices differ from the spec's layout, so its config, its boot-time unit (which
    would apply the new layout at the next boot) and the layout wait for a rollout there: what differs and
    that (deploy/mig.py puts "not in this rollout" before it). None: deploy as usual."""
    diff = differences(gpus, facts) if outside else []
    if not diff:
        return None
    return (f"{'; '.join(diff)}; the MIG config, corral-mig.service and the layout stay as they are until "
            "an apply rolls the layout out here")


def node_gres(model: str, count: int, facts) -> list[tuple[str, int]]:
    """(type, count) of a node's GPU GRES: whole GPUs of `model`, then MIG devices by profile."""
    mig = facts.mig if facts is not None else ()
    whole = count - len({d.gpu for d in mig})
    out = [(model, whole)] if whole > 0 else []
    return out + sorted(Counter(d.profile for d in mig).items(), key=lambda kv: profile_key(kv[0]))


def gres_text(model: str, count: int, facts) -> str:
    return ",".join(f"gpu:{t}:{n}" for t, n in node_gres(model, count, facts))


def spec_types(cluster) -> set[str]:
    """Every MIG profile the spec's layouts name (accounting tracks each as a TRES)."""
    return {p for n in cluster.nodes if n.gpus for ps in (layout(n.gpus) or {}).values() for p in ps}


def gres_lines(name: str, model: str, count: int, facts, topo) -> list[str]:
    """gres.conf lines of one node with MIG devices: whole GPUs by File= (with Cores/Links when
    known), each MIG device by MultipleFiles= (its GPU and its two access devices)."""
    mig_gpus = {d.gpu for d in facts.mig}
    cores, links = topo if topo and len(topo[0]) == count else ((), ())
    out = []
    for i in range(count):
        if i not in mig_gpus:
            extra = (f" Cores={cores[i]}" if cores and cores[i] else "") + (f" Links={links[i]}" if links else "")
            out.append(f"NodeName={name} Name=gpu Type={model} File=/dev/nvidia{i}{extra}")
    for d in facts.mig:
        out.append(f"NodeName={name} Name=gpu Type={d.profile} MultipleFiles={d.files()}")
    return out
