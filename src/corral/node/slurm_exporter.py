#!/usr/bin/python3
"""corral's Slurm exporter: Prometheus metrics from sinfo, squeue, sdiag, scontrol ping and sacctmgr.

    slurm_exporter.py --listen 10.0.0.10:9341 [--timeout 10]

Every scrape runs the five commands in parallel (each bounded by --timeout); a command that fails
sets corral_slurm_command_error{command} to 1 and only its metrics are missing.
Each connection gets its own thread (at most MAX_CONNECTIONS), and one silent for IDLE_TIMEOUT is dropped.
Runs on the controller as a systemd service (render/slurm_exporter.py); needs python3-prometheus-client.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily

try:
    from . import slurm_exporter_parse as P
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import slurm_exporter_parse as P  # type: ignore[no-redef]

COMMANDS = {
    "sinfo": ["sinfo", "-N", "-h", "-O", P.SINFO_FORMAT],
    "squeue": ["squeue", "-h", "-a", "-O", P.SQUEUE_FORMAT],
    "sdiag": ["sdiag"],
    "scontrol": ["scontrol", "ping"],
    "sacctmgr": ["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
}
ENV = dict(os.environ, PATH="/usr/bin:/usr/sbin:/bin:/sbin:/usr/local/bin", LC_ALL="C")


def run_command(argv: list[str], timeout: float) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout + ("" if p.returncode == 0 else p.stderr)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s"
    except OSError as e:
        return 127, str(e)


def gauge(name: str, doc: str, labels: list[str], rows) -> GaugeMetricFamily:
    g = GaugeMetricFamily(f"corral_slurm_{name}", doc, labels=labels)
    for key, value in rows:
        g.add_metric(list(key), value)
    return g


def node_metrics(nodes: dict[str, P.SlurmNode]):
    states = Counter(n.state for n in nodes.values())
    yield gauge("nodes", "Slurm nodes by state (idle, alloc, mix, drain, down, other)", ["state"],
                [((s,), states.get(s, 0)) for s in P.NODE_STATES])
    yield gauge("node_state", "1 for the node's current state", ["node", "state"],
                [((n.name, n.state), 1) for n in nodes.values()])
    yield gauge("node_responding", "0 when slurmctld marks the node not responding (*)", ["node"],
                [((n.name,), int(n.responding)) for n in nodes.values()])
    yield gauge("node_drained", "1 for drained/down nodes with a reason (corral: reasons kept, others 'other')",
                ["node", "reason"],
                [((n.name, n.reason if n.reason.startswith("corral:") else "other"), 1)
                 for n in nodes.values() if n.state in ("drain", "down") and n.reason])
    yield gauge("node_gpus", "GPUs of the node by type", ["node", "type"],
                [((n.name, t), c) for n in nodes.values() for t, c in n.gpus.items()])
    yield gauge("node_gpus_alloc", "Allocated GPUs of the node by type", ["node", "type"],
                [((n.name, t), n.gpus_alloc.get(t, 0)) for n in nodes.values() for t in n.gpus])
    yield gauge("partition_gpus", "GPUs per partition and type: alloc, idle, unavailable (drain/down)",
                ["partition", "type", "state"], sorted(P.partition_gpus(nodes).items()))


def job_metrics(jobs: list[P.Job]):
    count, gpus = Counter(), Counter()
    pending, pending_gpus = Counter(), Counter()
    for j in jobs:
        count[(j.state, j.partition, j.account)] += 1
        gpus[(j.state, j.partition, j.account)] += j.gpus
        if j.state == "pending":
            pending[(j.partition, j.reason or "None")] += 1
            pending_gpus[(j.partition, j.reason or "None")] += j.gpus
    labels = ["state", "partition", "account"]
    yield gauge("jobs", "Jobs by state, partition and account", labels, sorted(count.items()))
    yield gauge("job_gpus", "GPUs of those jobs (allocated, or requested while pending)", labels, sorted(gpus.items()))
    yield gauge("pending_jobs", "Pending jobs by partition and reason", ["partition", "reason"], sorted(pending.items()))
    yield gauge("pending_job_gpus", "GPUs requested by pending jobs by partition and reason", ["partition", "reason"],
                sorted(pending_gpus.items()))


def sdiag_metrics(text: str):
    values, rpcs = P.parse_sdiag(text)
    for name, value in sorted(values.items()):
        yield gauge(name, f"sdiag: {name.replace('_', ' ')}", [], [((), value)])
    if rpcs:
        yield gauge("rpc_count", "sdiag: RPCs by message type since the statistics reset", ["type"],
                    [((t,), c) for t, (c, _s) in sorted(rpcs.items())])
        yield gauge("rpc_seconds_total", "sdiag: total time of RPCs by message type", ["type"],
                    [((t,), s) for t, (_c, s) in sorted(rpcs.items())])


class SlurmCollector:
    def __init__(self, run=run_command, timeout: float = 10.0) -> None:
        self.run, self.timeout = run, timeout
        self.pool = ThreadPoolExecutor(max_workers=len(COMMANDS))

    def collect(self):
        start = time.monotonic()
        futures = {name: self.pool.submit(self.run, argv, self.timeout) for name, argv in COMMANDS.items()}
        got = {name: f.result() for name, f in futures.items()}
        errors = {name: rc != 0 for name, (rc, _out) in got.items()}
        for name, (rc, out) in got.items():
            if rc != 0 and name not in ("scontrol", "sacctmgr"):  # those two are reported as up=0
                print(f"corral-slurm-exporter: {name} failed (rc={rc}): {out.strip()[-200:]}", file=sys.stderr)
        yield gauge("slurmctld_up", "1 when scontrol ping reaches a slurmctld", [],
                    [((), int(P.ping_up(got["scontrol"][1])))])
        yield gauge("slurmdbd_up", "1 when sacctmgr reaches slurmdbd", [], [((), int(not errors["sacctmgr"]))])
        if not errors["sinfo"]:
            yield from node_metrics(P.parse_sinfo(got["sinfo"][1]))
        if not errors["squeue"]:
            yield from job_metrics(P.parse_squeue(got["squeue"][1]))
        if not errors["sdiag"]:
            yield from sdiag_metrics(got["sdiag"][1])
        yield gauge("command_error", "1 when the command failed or timed out in this scrape", ["command"],
                    [((n,), int(e)) for n, e in errors.items()])
        yield gauge("scrape_duration_seconds", "Time this scrape took", [], [((), time.monotonic() - start)])


IDLE_TIMEOUT = 5.0  # s a connection may stay silent (each read, and each write of the answer)
MAX_CONNECTIONS = 16  # served at once (Prometheus needs one or two); more are closed at once


class QuietHandler(WSGIRequestHandler):
    timeout = IDLE_TIMEOUT  # socketserver sets it on the connection: an idle client is dropped after it

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # an idle (socket.timeout) or vanished client: dropped quietly
            pass

    def log_message(self, *args) -> None:  # no line per scrape
        pass


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """A thread per connection (an idle client must not stall the scrapes), at most MAX_CONNECTIONS."""
    daemon_threads = True

    def server_activate(self) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().server_activate()

    def process_request(self, request, client_address) -> None:
        if self.slots.acquire(blocking=False):
            super().process_request(request, client_address)
        else:
            super().shutdown_request(request)  # over the bound: closed at once (it holds no slot)

    def shutdown_request(self, request) -> None:  # each connection served ends here, once
        super().shutdown_request(request)
        self.slots.release()


def make_server_for(listen: str, registry: CollectorRegistry) -> WSGIServer:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    server_class = ThreadingWSGIServer
    if ":" in host:
        class V6(ThreadingWSGIServer):
            address_family = socket.AF_INET6
        server_class = V6
    return make_server(host, int(port), make_wsgi_app(registry), server_class=server_class, handler_class=QuietHandler)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="corral-slurm-exporter", description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", required=True, help="address:port to serve /metrics on")
    ap.add_argument("--timeout", type=float, default=10.0, help="bound on each Slurm command (s)")
    args = ap.parse_args(argv)
    registry = CollectorRegistry()
    registry.register(SlurmCollector(timeout=args.timeout))
    server = make_server_for(args.listen, registry)
    print(f"corral-slurm-exporter: serving http://{args.listen}/metrics", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
