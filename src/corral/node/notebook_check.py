"""validate's "notebook" check, run on the hub node by the hub's venv python (tornado is there): as a user,
start a server through the hub's REST API (1 GPU where the form offers one), run one cell in a kernel on it
that prints the job id and the visible GPUs, stop the server, and print one JSON line: what happened.

    notebook_check.py USER HUB_API PROXY_API TIMEOUT_S   (tokens in the environment: CORRAL_VALIDATE_TOKEN,
                                                           CONFIGPROXY_AUTH_TOKEN; never on the command line)

The user's server is the user's own program, so it only ever sees a token of that user: the hub-managed service
`corral-validate` (its role: `tokens` of this one user) makes a short-lived token of the user, limited to their
own server, and deletes it at the end. The service's token goes to the hub alone, the proxy's to the proxy alone.
Whatever fails, the server is asked to stop before the program ends; corral's validate then checks its job is
gone. Imports nothing of corral.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from urllib.parse import quote

SCOPES = ("servers", "access:servers", "read:users:name")  # of the user's own server alone (`!user=USER`)


def main(argv: list[str]) -> int:
    from tornado.httpclient import HTTPClient, HTTPRequest
    user, hub, proxy, timeout = argv[0], argv[1].rstrip("/"), argv[2].rstrip("/"), float(argv[3])
    service, proxy_token = os.environ["CORRAL_VALIDATE_TOKEN"], os.environ["CONFIGPROXY_AUTH_TOKEN"]
    client, out = HTTPClient(), {"user": user}
    deadline = time.monotonic() + timeout

    def call(method: str, url: str, body=None, auth: str | None = None):
        req = HTTPRequest(url, method=method, headers={"Authorization": f"token {auth or token}"}, request_timeout=30,
                          body=None if body is None else json.dumps(body), allow_nonstandard_methods=True)
        resp = client.fetch(req, raise_error=False)
        text = resp.body.decode() if resp.body else ""
        if resp.code >= 400 or resp.code == 599:
            raise RuntimeError(f"{method} {url}: HTTP {resp.code}: {text[:300] or resp.reason}")
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    base = f"{hub}/hub/api/users/{quote(user)}"
    try:
        made = call("POST", f"{base}/tokens", {"expires_in": int(timeout) + 120, "scopes": [
            f"{s}!user={user}" for s in SCOPES], "note": "corral validate's notebook check"}, auth=service)
    except Exception as exc:  # noqa: BLE001 - reported as the check's failure
        print(json.dumps({**out, "error": f"making a token of {user}: {exc}"}))
        return 0
    token = made["token"]
    try:
        call("POST", f"{base}/server", json.loads(os.environ.get("CORRAL_NOTEBOOK_OPTIONS", "{}")))
        while True:
            server = call("GET", base).get("servers", {}).get("", {})
            if server.get("ready"):
                break
            if not server or time.monotonic() > deadline:
                raise RuntimeError("the server did not start" + (" in time" if server else " (the hub gave up)"))
            time.sleep(1)
        prefix = f"/user/{user}/"
        routes = call("GET", f"{proxy}/api/routes", auth=proxy_token)
        target = next((r["target"] for path, r in routes.items() if path.rstrip("/") + "/" == prefix), None)
        if target is None:
            raise RuntimeError(f"the proxy has no route for {prefix}")
        out["target"] = target
        kernel = call("POST", f"{target}{prefix}api/kernels", {})["id"]
        try:
            out.update(_execute(target.replace("http", "ws", 1) + f"{prefix}api/kernels/{kernel}/channels", token,
                                deadline))
        finally:
            call("DELETE", f"{target}{prefix}api/kernels/{kernel}")
    except Exception as exc:  # noqa: BLE001 - reported as the check's failure
        out["error"] = str(exc)
    finally:
        try:
            call("DELETE", f"{base}/server")
            out["stop_asked"] = True
        except Exception as exc:  # noqa: BLE001
            out.setdefault("error", f"stopping the server: {exc}")
        try:
            call("DELETE", f"{base}/tokens/{quote(made['id'])}", auth=service)
        except Exception as exc:  # noqa: BLE001
            out.setdefault("error", f"deleting the check's token: {exc}")
    print(json.dumps(out))
    return 0


def _execute(url: str, token: str, deadline: float) -> dict:
    """Run the cell over the kernel's websocket; its printed line split into the job id and the GPUs."""
    from tornado.httpclient import HTTPRequest
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect
    code = ("import os; print('JOB=' + os.environ.get('SLURM_JOB_ID', '-'), "
            "'GPUS=' + os.environ.get('CUDA_VISIBLE_DEVICES', '-'), 'HOST=' + os.uname().nodename)")
    msg_id, session = uuid.uuid4().hex, uuid.uuid4().hex

    async def run() -> str:
        conn = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
        queue: asyncio.Queue = asyncio.Queue()

        async def pump() -> None:  # one reader: a read given up on (the queue's get) loses no message
            while True:
                raw = await conn.read_message()
                await queue.put(raw)
                if raw is None:
                    return
        reader = asyncio.ensure_future(pump())
        try:
            return await ask(conn, queue)
        finally:
            conn.close()
            reader.cancel()

    async def ask(conn, queue) -> str:
        header = {"msg_id": msg_id, "session": session, "username": "corral", "msg_type": "execute_request",
                  "version": "5.3", "date": ""}
        text = ""
        while time.monotonic() < deadline:  # the kernel answers once its channels are up: ask until it does
            conn.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "channel": "shell",
                                           "content": {"code": code, "silent": False, "store_history": False,
                                                       "user_expressions": {}, "allow_stdin": False}}))
            ask_end = min(deadline, time.monotonic() + 5)
            while time.monotonic() < ask_end:
                try:
                    raw = await asyncio.wait_for(queue.get(), ask_end - time.monotonic())
                except asyncio.TimeoutError:
                    break
                if raw is None:
                    raise RuntimeError("the kernel's websocket closed")
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
                if kind == "stream":
                    text += msg["content"].get("text", "")
                elif kind == "error":
                    raise RuntimeError(f"the cell failed: {msg['content'].get('ename')}: {msg['content'].get('evalue')}")
                elif kind in ("execute_reply", "status") and text and (
                        kind == "execute_reply" or msg["content"].get("execution_state") == "idle"):
                    return text
        raise RuntimeError("the cell gave no output in time")

    line = IOLoop.current().run_sync(run)
    fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
    return {"job": fields.get("JOB"), "gpus": fields.get("GPUS"), "host": fields.get("HOST")}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
