"""Smoke validation of the engine smoke deploy: memcached answers on every node's own address."""

from __future__ import annotations

import socket
import time
from corral.checks.result import Check
from corral.parallel import pmap
from corral.spec.cluster import Cluster


def _memcached(address: str, port: int = 11211, timeout: float = 3.0) -> str:
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.sendall(b"version\r\n")
        return s.recv(64).decode(errors="replace").strip()


def check_smoke(cluster: Cluster, wait_s: float = 10.0) -> list[Check]:
    """One result per node; a daemon just restarted gets `wait_s` to start listening."""
    def one(node) -> Check:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                reply = _memcached(node.address)
                break
            except OSError as exc:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                return Check("smoke service", "FAIL", f"{node.name}: memcached not answering on "
                             f"{node.address}:11211 ({exc})")
        status = "OK" if reply.startswith("VERSION") else "FAIL"
        return Check("smoke service", status, f"{node.name}: {reply}")
    return pmap(one, cluster.nodes)
