"""Readiness tests, rendered (pure): the shell test a deploy waits on after starting a daemon."""

from __future__ import annotations


def http_ready(address: str, port: int, path: str) -> str:
    """Succeeds once http://ADDRESS:PORT/PATH answers (2 s per try)."""
    target = f"[{address}]" if ":" in address else address
    return (f"python3 -I -c \"import urllib.request,sys; urllib.request.urlopen('http://{target}:{port}{path}', "
            "timeout=2)\"")
