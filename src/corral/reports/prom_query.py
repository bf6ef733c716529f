"""The GPU part of `corral report usage`: one Prometheus query, through the report's seam.

Prometheus runs on the monitoring node and binds the node's cluster address (monitoring.listen), which
the host running corral may not reach (corral reaches nodes over SSH, perhaps through ssh.jump_host).
So the query goes where the sacct query goes: over SSH (pinned host keys), through the same
`run(node, command, *, timeout)` seam (tests answer with captured API answers), run on the monitoring
node against its own Prometheus. The client there is python3's urllib (CLIENT below), not curl: corral
installs no curl on the monitoring node (nor has the virtual cluster's image one), while python3 is
already what corral's readiness checks of Prometheus run there (render/ready.py: http_ready).
Bounded three times: Prometheus's own `timeout` parameter (60 s), `timeout 75` around the client, the
SSH command (90 s).

Never fails the report: every way this can go wrong (no monitoring node, SSH, Prometheus down or
refusing, an answer not understood, no sample) is a `reason`, printed as "no GPU utilisation data:
<reason>", while the sacct figures stand.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from corral.engine.shell import cmd
from corral.errors import CorralError
from corral.render.prometheus import dcgm_skip_reason
from corral.reports.prom_api import JobUse, NotUnderstood, Refused, figures
from corral.reports.promql import UTIL, step_s, usage_query
from corral.spec.cluster import Cluster

TIMEOUT_S, CLIENT_MAX_S, PROM_TIMEOUT_S = 90, 75, 60
REFUSED, TIMED_OUT = 7, 28  # the client's exit codes (curl's numbers) when nothing answers, too slowly
# argv: URL, query, evaluation time, Prometheus's timeout (s). POSTs the form (a long query fits), never
# through a proxy (an http_proxy of root's would not know the cluster's address), and prints the body
# whatever the HTTP status: Prometheus explains a refusal (400, 422, 503) in JSON.
CLIENT = """\
import socket, sys, urllib.error, urllib.parse, urllib.request
url, query, at, limit = sys.argv[1:5]
form = urllib.parse.urlencode({"query": query, "time": at, "timeout": limit + "s"}).encode()
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(url, data=form, timeout=float(limit) + 10) as answer:
        sys.stdout.write(answer.read().decode("utf-8", "replace"))
except urllib.error.HTTPError as e:
    sys.stdout.write(e.read().decode("utf-8", "replace"))
except OSError as e:
    reason = getattr(e, "reason", e)
    print(f"{type(reason).__name__}: {reason}", file=sys.stderr)
    sys.exit(28 if isinstance(reason, (socket.timeout, TimeoutError)) else 7)
"""


@dataclass
class GpuData:
    ok: bool = False
    reason: str | None = None       # why there is no data (None when ok)
    node: str | None = None         # the monitoring node asked
    step_s: int | None = None
    uses: dict[str, JobUse] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)   # Prometheus's warnings, retention


def prom_command(address: str, port: int, query: str, at: int) -> str:
    """The client on the node, bounded by coreutils' timeout (exit 124 past it)."""
    host = f"[{address}]" if ":" in address else address
    return cmd("timeout", CLIENT_MAX_S, "python3", "-I", "-c", CLIENT, f"http://{host}:{int(port)}/api/v1/query", query,
               int(at), PROM_TIMEOUT_S).get_raw_value()


def _tail(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(lines[-2:])[-300:] or "no output"


def _failure(node: str, target: str, proc) -> str:
    rc, tail = proc.returncode, _tail(proc.stderr or proc.stdout)
    if rc == 255:
        return f"cannot reach {node} over SSH: {tail}"
    if rc == REFUSED:
        return f"Prometheus on {node} ({target}) is not answering (is it running?): {tail}"
    if rc in (TIMED_OUT, 124):
        return f"Prometheus on {node} ({target}) did not answer within {CLIENT_MAX_S} s"
    if rc == 127:
        return f"python3 or timeout is missing on {node}: {tail}"
    return f"the query on {node} failed (rc={rc}): {tail}"


def _no_dcgm(cluster: Cluster) -> str:
    """Why no node publishes DCGM samples ('' when one does)."""
    reasons = {dcgm_skip_reason(cluster, n) for n in cluster.nodes if n.gpu_count and "compute" in n.roles}
    if None in reasons or not reasons:
        return ""
    if cluster.spec.virtual is not None:
        return "emulated GPUs (virtual cluster: DCGM cannot read them, dcgm-exporter is not deployed); "
    return f"dcgm-exporter is deployed on no node ({sorted(reasons)[0]}); "


def fetch(cluster: Cluster, run, since: dt.datetime, until: dt.datetime, now: dt.datetime, *,
          gpu_jobs: int) -> GpuData:
    """The per-job figures of [since, until) from the monitoring node's Prometheus (`gpu_jobs`: how many
    sacct jobs held GPUs in the window: none, nothing to ask)."""
    m, mon = cluster.spec.monitoring, cluster.with_role("monitoring")
    if not m.enabled:
        return GpuData(reason="monitoring is off (monitoring.enabled: false): no Prometheus to ask")
    if not mon:
        return GpuData(reason="the spec has no monitoring node: no Prometheus to ask")
    if not gpu_jobs:
        return GpuData(reason="no job held a GPU in the window")
    node = mon[0]
    window = int((until - since).total_seconds())
    data = GpuData(node=node.name, step_s=step_s(window, m.scrape_interval_s))
    target = f"{node.address}:{m.prometheus_port}"
    command = prom_command(node.address, m.prometheus_port, usage_query(window, data.step_s), int(until.timestamp()))
    try:
        proc = run(node.name, command, timeout=TIMEOUT_S)
    except (CorralError, OSError) as exc:  # a timeout (NodeError), no ssh on this host
        data.reason = f"cannot query Prometheus on {node.name}: {' '.join(str(exc).split())}"
        return data
    if proc.returncode != 0:
        data.reason = _failure(node.name, target, proc)
        return data
    try:
        got = figures(proc.stdout)
    except Refused as exc:
        data.reason = f"Prometheus on {node.name} refused the query: {exc}"
        return data
    except NotUnderstood as exc:
        data.reason = f"Prometheus on {node.name} ({target}) gave an answer not understood: {exc}"
        return data
    data.notes += [f"Prometheus warns: {w}" for w in got.warnings]
    first = now - dt.timedelta(days=m.retention_days)
    if since < first:
        data.notes.append(f"Prometheus keeps {m.retention_days} days (monitoring.retention_days): no "
                          f"utilisation data before about {first.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M}Z")
    if not any(u.mean_util is not None for u in got.jobs.values()):
        data.reason = (f"{_no_dcgm(cluster)}Prometheus on {node.name} has no {UTIL} sample with a job label "
                       f"(hpc_job) in the window")
        return data
    data.ok, data.uses = True, got.jobs
    return data
