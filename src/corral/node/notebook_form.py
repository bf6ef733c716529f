"""The notebook hub's spawn form (its source installed as /etc/corral/jupyterhub/corral_notebook_form.py,
imported by jupyterhub_config.py): the form's HTML from the choices corral rendered from the spec (settings.json), the
checks of what a user asked for against those choices and against their QOS in Slurm's accounting, and
what batchspawner submits. Pure Python, standard library only (it runs in the hub's venv): corral's rules and tests import it too.
"""

from __future__ import annotations

import html
import re

_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def minutes(text: str) -> int | None:
    """Minutes of a Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S); None: INFINITE or UNLIMITED or empty."""
    text = text.strip()
    if text.upper() in ("", "INFINITE", "UNLIMITED"):
        return None
    m = _TIME.fullmatch(text)
    if not m:
        raise ValueError(f"not a Slurm time: {text!r} (e.g. 2:00:00 or 1-00:00:00)")
    d, a, b, c = m.groups()
    if d is not None:  # D-H[:M[:S]]
        return int(d) * 1440 + int(a) * 60 + int(b or 0) + (1 if c and int(c) else 0)
    if c is not None:  # H:M:S
        return int(a) * 60 + int(b) + (1 if int(c) else 0)
    if b is not None:  # M:S
        return int(a) + (1 if int(b) else 0)
    return int(a)


def _option(value: str, label: str, selected: bool = False) -> str:
    sel = " selected" if selected else ""
    return f'<option value="{html.escape(value)}"{sel}>{html.escape(label)}</option>'


def form_html(s: dict) -> str:
    """The form: partition, GPU type and count, CPUs, memory and time, each bounded by the spec's choices."""
    parts = s["partitions"]
    kinds = sorted({t for p in parts for t in p["gpus"]})
    rows = [
        '<div class="form-group"><label for="partition">Partition</label>'
        '<select class="form-control" name="partition" id="partition">'
        + "".join(_option(p["name"], p["name"] + (" (default)" if p.get("default") else ""), bool(p.get("default")))
                  for p in parts) + "</select></div>",
        '<div class="form-group"><label for="gpu_type">GPU type</label>'
        '<select class="form-control" name="gpu_type" id="gpu_type">'
        + "".join(_option(t, f"{t} (partitions: {', '.join(p['name'] for p in parts if t in p['gpus'])})")
                  for t in kinds) + "</select></div>",
        f'<div class="form-group"><label for="gpus">GPUs</label><input class="form-control" type="number" '
        f'name="gpus" id="gpus" min="0" max="{int(s["max_gpus"])}" value="{min(1, int(s["max_gpus"]))}"></div>',
        f'<div class="form-group"><label for="cpus">CPUs</label><input class="form-control" type="number" '
        f'name="cpus" id="cpus" min="1" max="{int(s["max_cpus"])}" value="{min(2, int(s["max_cpus"]))}"></div>',
        f'<div class="form-group"><label for="memory_gb">Memory (GB; 0: the partition\'s default per CPU)</label>'
        f'<input class="form-control" type="number" name="memory_gb" id="memory_gb" min="0" '
        f'max="{int(s["max_memory_gb"])}" value="0"></div>',
        f'<div class="form-group"><label for="time">Time limit (H:MM:SS, at most {html.escape(s["max_time"])})'
        f'</label><input class="form-control" type="text" name="time" id="time" '
        f'value="{html.escape(s["default_time"])}"></div>',
    ]
    return "\n".join(rows)


def _one(formdata: dict, key: str) -> str:
    v = formdata.get(key, [""])
    return (v[0] if isinstance(v, list) and v else v if isinstance(v, str) else "").strip()


def _int(formdata: dict, key: str, what: str, low: int, high: int) -> int:
    text = _one(formdata, key)
    if not re.fullmatch(r"\d{1,6}", text):
        raise ValueError(f"{what}: a whole number from {low} to {high}, not {text[:20]!r}")
    n = int(text)
    if not low <= n <= high:
        raise ValueError(f"{what}: {n} is outside {low}..{high}")
    return n


def parse(formdata: dict, s: dict) -> dict:
    """What the user asked for, checked against the spec's choices; ValueError with the reason otherwise."""
    parts = {p["name"]: p for p in s["partitions"]}
    name = _one(formdata, "partition")
    if name not in parts:
        raise ValueError(f"partition: {name[:40]!r} is not one of {', '.join(parts)}")
    part = parts[name]
    gpus = _int(formdata, "gpus", "GPUs", 0, int(s["max_gpus"]))
    kind = _one(formdata, "gpu_type")
    if gpus:
        if kind not in part["gpus"]:
            have = ", ".join(sorted(part["gpus"])) or "none"
            raise ValueError(f"GPU type: partition {name} has no {kind[:40]!r} GPUs (it has: {have})")
        if gpus > part["gpus"][kind]:
            raise ValueError(f"GPUs: a node of partition {name} has at most {part['gpus'][kind]} {kind} GPUs, "
                             f"{gpus} asked")
    time = _one(formdata, "time") or s["default_time"]
    asked = minutes(time)
    limit = minutes(s["max_time"])
    if asked is None or asked <= 0 or (limit is not None and asked > limit):
        raise ValueError(f"time limit: {time[:20]!r} is not within 0:01:00..{s['max_time']}")
    return {"partition": name, "gpu_type": kind if gpus else "", "gpus": gpus,
            "cpus": _int(formdata, "cpus", "CPUs", 1, int(s["max_cpus"])),
            "memory_gb": _int(formdata, "memory_gb", "memory (GB)", 0, int(s["max_memory_gb"])) if _one(
                formdata, "memory_gb") else 0, "time": time}


def formdata(options: dict | None, s: dict) -> dict:
    """What a spawn asked for as the form's data: the form's own (lists of strings), or the options of a REST
    API spawn (scalars; JupyterHub hands those to the spawner without the form), or, with none, the form's
    defaults for what they leave out (the default partition, no GPU, 1 CPU, the default time): each then
    goes through parse()."""
    default = next((p["name"] for p in s["partitions"] if p.get("default")), s["partitions"][0]["name"])
    out = {"partition": [default], "gpus": ["0"], "cpus": ["1"], "memory_gb": ["0"], "time": [s["default_time"]]}
    return {**out, **{k: v if isinstance(v, list) else [str(v)] for k, v in (options or {}).items()}}


def user_qos(assoc: str, user: str) -> list[str]:
    """The QOS a user's jobs run under, from `sacctmgr -nP show assoc user=USER format=user,defaultqos,qos`:
    the default QOS of the user's (first) association."""
    for line in assoc.splitlines():
        f = line.split("|")
        if len(f) >= 3 and f[0] == user:
            return [q for q in ([f[1]] if f[1] else sorted(q for q in f[2].split(",") if q)) if q]
    return []


def qos_limits(out: str) -> dict[str, dict]:
    """QOS name -> {"gpus_per_user", "wall"} from `sacctmgr -nP show qos format=name,maxtrespu,maxwall`."""
    limits = {}
    for line in out.splitlines():
        f = line.split("|")
        if len(f) < 3 or not f[0]:
            continue
        m = re.search(r"gres/gpu=(\d+)", f[1])
        limits[f[0]] = {"gpus_per_user": int(m.group(1)) if m else None, "wall": minutes(f[2]) if f[2] else None}
    return limits


def qos_refusal(req: dict, qos: list[str], limits: dict[str, dict], partition_qos: str | None = None) -> str | None:
    """Why Slurm would never start this request under the user's QOS (and the partition's), or None."""
    for name in [*qos[:1], *([partition_qos] if partition_qos else [])]:
        lim = limits.get(name) or {}
        if lim.get("gpus_per_user") is not None and req["gpus"] > lim["gpus_per_user"]:
            return (f"GPUs: {req['gpus']} asked, but QOS {name} allows you {lim['gpus_per_user']} at a time "
                    "(MaxTRESPerUser gres/gpu)")
        wall, asked = lim.get("wall"), minutes(req["time"])
        if wall is not None and asked is not None and asked > wall:
            return f"time limit: {req['time']} asked, but QOS {name} allows at most {wall} minutes (MaxWall)"
    return None


def batch_request(req: dict) -> dict:
    """batchspawner's req_* values for the request."""
    return {"req_partition": req["partition"], "req_nprocs": str(req["cpus"]),
            "req_memory": f"{req['memory_gb']}G" if req["memory_gb"] else "",
            "req_runtime": req["time"], "req_gres": f"gpu:{req['gpu_type']}:{req['gpus']}" if req["gpus"] else ""}
