"""The virtual cluster's BMC: hardware EMULATION. A small Redfish service on the bridge's host address,
one ComputerSystem per virtual node: PowerState On while the node's systemd-nspawn runs; Reset On boots
the node (VirtualCluster.power_on, as `virtual up` does), GracefulShutdown and ForceOff power it off
(VNode.stop, as `virtual down` does for a node). HTTP basic auth with the credentials in the spec's
power.bmc.credentials_file, generated (0600) by `virtual up` when missing. Test hook: a node named in
<state_dir>/bmc-refuse (one name a line) gets HTTP 503 for every Reset, as a broken BMC would answer.

Run as its own process (`python -m corral.virtual.bmc SPEC`), started by `virtual up` when power is
enabled and stopped by `virtual down` by its recorded PID (start_server/stop_server).
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import secrets as _random
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

from corral.errors import HostToolError

RESET = "ComputerSystem.Reset"
RESET_TYPES = ["On", "ForceOff", "GracefulShutdown"]
MAX_BODY = 4096


class Power(Protocol):
    def is_on(self, name: str) -> bool: ...
    def on(self, name: str) -> None: ...
    def off(self, name: str, force: bool) -> None: ...


POST_S = 2.0  # the emulated power-on self test; Slurm takes a powered-up node back only when its boot
# time (from its uptime, virtual/node.py) is after the resume request


def _error(message: str) -> dict:
    return {"error": {"code": "Base.1.0.GeneralError", "message": message,
                      "@Message.ExtendedInfo": [{"MessageId": "Base.1.0.GeneralError", "Message": message}]}}


class Handler(BaseHTTPRequestHandler):
    server: BmcServer
    server_version = "corral-virtual-bmc"

    def log_message(self, fmt: str, *args) -> None:  # method, path, status: never a header
        self.server.log(f"{self.address_string()} {fmt % args}")

    def _send(self, status: int, body: dict | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="corral virtual BMC"')
        if data:
            self.send_header("Content-Type", "application/json")
            self.send_header("OData-Version", "4.0")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            given = base64.b64decode(header[6:], validate=True)
        except ValueError:
            return False
        return hmac.compare_digest(given, self.server.secret)

    def _route(self) -> tuple[str, ...] | None:
        parts = tuple(p for p in self.path.split("?", 1)[0].split("/") if p)
        if parts[:2] != ("redfish", "v1"):
            return None
        return parts[2:]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        route = self._route()
        if route is None:
            return self._send(404, _error("not a Redfish resource"))
        if route == ():  # the service root answers without credentials (Redfish spec)
            return self._send(200, self.server.root())
        if not self._authorized():
            return self._send(401, _error("authentication required"))
        if route == ("Systems",):
            return self._send(200, self.server.collection())
        if len(route) == 2 and route[0] == "Systems" and route[1] in self.server.nodes:
            return self._send(200, self.server.system(route[1]))
        return self._send(404, _error(f"no resource {self.path[:80]}"))

    def do_POST(self) -> None:  # noqa: N802
        route = self._route()
        if not self._authorized():
            return self._send(401, _error("authentication required"))
        if not route or len(route) != 4 or route[0] != "Systems" or route[2:] != ("Actions", RESET) \
                or route[1] not in self.server.nodes:
            return self._send(404, _error(f"no action {self.path[:80]}"))
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(min(length, MAX_BODY)) or b"{}")
            reset = body.get("ResetType")
        except (ValueError, AttributeError):
            return self._send(400, _error("the body is not a JSON object"))
        if reset not in RESET_TYPES:
            return self._send(400, _error(f"ResetType {str(reset)[:40]!r} not one of {', '.join(RESET_TYPES)}"))
        name = route[1]
        if name in self.server.refused():
            return self._send(503, _error(f"{name}: this emulated BMC was told to refuse the node (bmc-refuse)"))
        self.server.reset(name, reset)
        return self._send(204)


class BmcServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], nodes: list[str], power: Power, user: str, password: str,
                 refuse_file: Path | None = None, log_file: Path | None = None) -> None:
        self.nodes, self.power = list(nodes), power
        self.secret = f"{user}:{password}".encode()
        self.refuse_file, self.log_file = refuse_file, log_file
        self._locks = {n: threading.Lock() for n in nodes}
        super().__init__(address, Handler)

    def log(self, line: str) -> None:
        if self.log_file is None:
            return
        try:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_file, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
        except OSError:  # a log that cannot be written never fails a request
            pass

    def refused(self) -> set[str]:
        try:
            return set(self.refuse_file.read_text().split()) if self.refuse_file else set()
        except OSError:
            return set()

    def root(self) -> dict:
        return {"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Id": "RootService",
                "Name": "corral virtual BMC (emulated)", "RedfishVersion": "1.6.0",
                "UUID": "00000000-0000-0000-0000-000000000000", "Systems": {"@odata.id": "/redfish/v1/Systems"}}

    def collection(self) -> dict:
        return {"@odata.id": "/redfish/v1/Systems", "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
                "Name": "Computer System Collection", "Members@odata.count": len(self.nodes),
                "Members": [{"@odata.id": f"/redfish/v1/Systems/{n}"} for n in self.nodes]}

    def system(self, name: str) -> dict:
        path = f"/redfish/v1/Systems/{name}"
        return {"@odata.id": path, "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem", "Id": name,
                "Name": name, "HostName": name, "SystemType": "Virtual",
                "PowerState": "On" if self.power.is_on(name) else "Off",
                "Actions": {f"#{RESET}": {"target": f"{path}/Actions/{RESET}",
                                          "ResetType@Redfish.AllowableValues": RESET_TYPES}}}

    def reset(self, name: str, reset: str) -> None:
        """Accepted at once (HTTP 204), done in the background, one action per node at a time."""
        def act() -> None:
            with self._locks[name]:
                try:
                    if reset == "On":
                        time.sleep(POST_S)  # power-on self test: the node boots after the request, as a machine
                    self.power.on(name) if reset == "On" else self.power.off(name, force=reset == "ForceOff")
                    self.log(f"{name}: {reset} done")
                except Exception as exc:  # noqa: BLE001 - a BMC logs and goes on
                    self.log(f"{name}: {reset} failed: {exc}")
        threading.Thread(target=act, daemon=True).start()


def ensure_credentials(path: Path) -> tuple[str, str]:
    """The virtual cluster's BMC credentials: `corral:<random>` made once (0600), then read."""
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"corral:{_random.token_urlsafe(24)}\n")
    user, _, password = path.read_text().splitlines()[0].partition(":")
    if not user or not password:
        raise HostToolError(f"{path}: not `user:password` on the first line", fix=f"remove {path}: `virtual up` makes a new one")
    return user, password


def start_server(spec: Path, log: Path) -> int:
    """`python -m corral.virtual.bmc SPEC` in its own session; returns its PID once it listens."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.exists() else 0  # an earlier run's "listening" does not count
    import corral  # the child runs this very corral (a source tree on PYTHONPATH included)
    src = str(Path(corral.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "corral.virtual.bmc", str(spec)], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, start_new_session=True, env=env)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise HostToolError(f"virtual BMC exited (rc={proc.returncode}); see {log}",
                                fix="free the port of power.bmc.nodes[].address")
        if b"listening" in log.read_bytes()[start:]:
            return proc.pid
        time.sleep(0.05)
    raise HostToolError(f"virtual BMC did not start listening; see {log}")


def stop_server(pid: int) -> None:
    """Stop the BMC we started, by its recorded PID (checked to still be corral's BMC)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"corral.virtual.bmc" in cmdline:
        os.kill(pid, signal.SIGTERM)


class ClusterPower:
    """Power as the virtual cluster has it: a node is on while its systemd-nspawn runs."""

    def __init__(self, vc) -> None:
        self.vc = vc

    def is_on(self, name: str) -> bool:
        return self.vc.node(name).running()

    def on(self, name: str) -> None:
        self.vc.power_on(name)

    def off(self, name: str, force: bool) -> None:
        self.vc.node(name).stop(timeout=2.0 if force else 20.0)


def main(argv: list[str]) -> int:
    from corral.spec.loader import load
    from corral.spec.rules_power import credentials_path, virtual_bmc_listen
    from corral.virtual.cluster import VirtualCluster
    vc = VirtualCluster(load(Path(argv[0])))
    listen = virtual_bmc_listen(vc.cluster)
    if listen is None:
        print("corral virtual BMC: power is not enabled in this spec", flush=True)
        return 2
    user, password = ensure_credentials(credentials_path(vc.cluster))
    nodes = [n.name for n in vc.cluster.with_role("compute")]
    server = BmcServer(listen, nodes, ClusterPower(vc), user, password, vc.state_dir / "bmc-refuse",
                       vc.state_dir / "logs" / "bmc-requests.log")
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"corral virtual BMC (emulated Redfish) listening on {listen[0]}:{listen[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
