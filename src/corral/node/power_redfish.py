"""A minimal Redfish client (stdlib only: runs on the controllers as Slurm's SlurmUser): find a node's
ComputerSystem under /redfish/v1/Systems, read its PowerState, ask for a ComputerSystem.Reset with a
ResetType the BMC allows. Every call is bounded (`timeout_s`); errors say what failed and where, never
the credentials (HTTP basic auth, sent only to the BMC's own URL).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

MAX_BODY = 1 << 20  # a Redfish resource is a few KiB
MAX_MEMBERS = 256
ON = ("On", "ForceOn")                   # preference order, first one the BMC allows
OFF = ("GracefulShutdown", "ForceOff")


class RedfishError(Exception):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # credentials go to the configured URL only
        return None


class Redfish:
    def __init__(self, base_url: str, user: str, password: str, timeout_s: float = 20,
                 verify_tls: bool = True) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout_s
        self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        handlers: list = [_NoRedirect()]
        if self.base.startswith("https://"):
            ctx = ssl.create_default_context()
            if not verify_tls:
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            handlers.append(urllib.request.HTTPSHandler(context=ctx))
        self._open = urllib.request.build_opener(*handlers).open

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        if not path.startswith("/"):
            raise RedfishError(f"{self.base}: the BMC named a resource that is not a path: {path[:80]!r}")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": self._auth, "Accept": "application/json",
                                              **({"Content-Type": "application/json"} if data else {})})
        where = f"{method} {self.base}{path}"
        try:
            with self._open(req, timeout=self.timeout) as resp:
                raw = resp.read(MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise RedfishError(f"{where}: the BMC refused the credentials (HTTP 401)") from None
            raise RedfishError(f"{where}: HTTP {exc.code}{_message(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RedfishError(f"{where}: BMC unreachable ({reason or type(exc).__name__}; "
                               f"bound {self.timeout:g} s)") from None
        if len(raw) > MAX_BODY:
            raise RedfishError(f"{where}: answer larger than {MAX_BODY} bytes")
        if not raw.strip():
            return {}
        try:
            out = json.loads(raw)
        except ValueError:
            raise RedfishError(f"{where}: the answer is not JSON (not a Redfish service?)") from None
        if not isinstance(out, dict):
            raise RedfishError(f"{where}: the answer is not a Redfish resource")
        return out

    def system(self, node: str) -> tuple[str, dict]:
        """The ComputerSystem of `node`: the only one, else the one whose Id or Name is the node's name."""
        root = self.request("GET", "/redfish/v1/")
        systems = _link(root.get("Systems")) or "/redfish/v1/Systems"
        members = [_link(m) for m in self.request("GET", systems).get("Members", [])][:MAX_MEMBERS]
        members = [m for m in members if m]
        if not members:
            raise RedfishError(f"{self.base}{systems}: the BMC lists no system")
        if len(members) == 1:
            return members[0], self.request("GET", members[0])
        by_path = [m for m in members if m.rstrip("/").rsplit("/", 1)[-1] == node]
        for path in by_path + [m for m in members if m not in by_path]:
            data = self.request("GET", path)
            if node in (data.get("Id"), data.get("Name"), data.get("HostName")):
                return path, data
        raise RedfishError(f"{self.base}{systems}: {len(members)} systems, none with Id or Name {node!r}")

    def allowed(self, path: str, data: dict) -> tuple[str, list[str] | None]:
        """The Reset action's target and the ResetTypes it allows (None: the BMC does not say)."""
        action = (data.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        target = action.get("target") or f"{path.rstrip('/')}/Actions/ComputerSystem.Reset"
        values = action.get("ResetType@Redfish.AllowableValues")
        info = action.get("@Redfish.ActionInfo")
        if values is None and isinstance(info, str):
            for p in self.request("GET", info).get("Parameters", []):
                if isinstance(p, dict) and p.get("Name") == "ResetType":
                    values = p.get("AllowableValues")
        return target, [v for v in values if isinstance(v, str)] if isinstance(values, list) else None

    def power(self, node: str, on: bool) -> str:
        """Power the node's system on (On) or off (GracefulShutdown); what was done, in words."""
        path, data = self.system(node)
        state = data.get("PowerState")
        if state == ("On" if on else "Off"):
            return f"already {state}"
        target, values = self.allowed(path, data)
        wanted = ON if on else OFF
        choice = next((v for v in wanted if values is None or v in values), None)
        if choice is None:
            raise RedfishError(f"{self.base}{path}: the BMC allows ResetType {', '.join(values)}, none of "
                               f"{', '.join(wanted)}")
        self.request("POST", target, {"ResetType": choice})
        return f"{choice} (was {state or 'unknown'})"


def _link(value) -> str | None:
    return value.get("@odata.id") if isinstance(value, dict) and isinstance(value.get("@odata.id"), str) else None


def _message(exc: urllib.error.HTTPError) -> str:
    """The Redfish error message of a failed call, if the BMC sent one."""
    try:
        body = json.loads(exc.read(MAX_BODY))
        msg = body["error"].get("message") or body["error"]["@Message.ExtendedInfo"][0]["Message"]
        return f": {str(msg)[:200]}"
    except Exception:  # noqa: BLE001 - no Redfish error body: the status says it
        return ""
