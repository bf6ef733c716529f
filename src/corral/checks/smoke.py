"""Smoke validation of the engine smoke deploy: memcached answers on every node's own address."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from corral.parallel import pmap
from corral.spec.cluster import Cluster


@dataclass
class CheckResult:
    name: str
    ok: bool
    message: str
    node: str | None = None


def _memcached(address: str, port: int = 11211, timeout: float = 3.0) -> str:
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.sendall(b"version\r\n")
        return s.recv(64).decode(errors="replace").strip()


def check_smoke(cluster: Cluster, wait_s: float = 10.0) -> list[CheckResult]:
    """One result per node; a daemon just restarted gets `wait_s` to start listening."""
    def one(node) -> CheckResult:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                reply = _memcached(node.address)
                break
            except OSError as exc:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                return CheckResult("smoke service", False, f"{node.name}: memcached not answering on "
                               f"{node.address}:11211 ({exc})", node.name)
        ok = reply.startswith("VERSION")
        return CheckResult("smoke service", ok, f"{node.name}: {reply}", node.name)
    return pmap(one, cluster.nodes)
