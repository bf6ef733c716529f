"""The attacker's cases from alice's notebook (security reviews 2 and 3), run on test_workbench's cluster: in
Debian's chromium she logs in to the hub, starts her JupyterLab (a Slurm job on a GPU node) and runs one cell in
her kernel, which tries, as her, from inside the job:

- N1: batchspawner's API with her server's own token from its environment, with the review's body (the commands a
  root hub would run): refused, and nothing she planted runs on login1 when the hub stops her server;
- N2: the hub's API with that token: bob's record, and the list of users (nobody's but hers);
- N5: a push token for the site registry with her own MUNGE credential (corral's credential helper): pull only;
- N6: another user's podman storage made first under root's parent: refused.

Not collected on its own (no test_ prefix): its test needs test_workbench's cluster."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.vcluster.attacks_hub import HOSTILE, PLANTED
from tests.vcluster.conftest import ssh
from tests.vcluster.notebooks import hub, notebook, run_first_cell, start_lab, stop_server
from tests.vcluster.test_users import as_alice

ATTACK = r"""
import base64, json, os, subprocess, urllib.error, urllib.request
def call(url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(1 << 20).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
api, auth = os.environ["JUPYTERHUB_API_URL"], {"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]}
out = {"uid": os.getuid(), "job": os.environ.get("SLURM_JOB_ID")}
out["batchspawner"] = call(api + "/batchspawner", HOSTILE, auth)[0]
out["bob"] = call(api + "/users/bob", None, auth)[0]
code, body = call(api + "/users", None, auth)
out["users"] = [code, sorted(u.get("name", "") for u in json.loads(body)) if code == 200 else None]
cred = subprocess.run(["/usr/local/bin/docker-credential-corral", "get"], input="ctl:5000", capture_output=True,
                      text=True, timeout=30).stdout
basic = "Basic " + base64.b64encode(("munge:" + json.loads(cred)["Secret"]).encode()).decode()
code, body = call("https://ctl:5043/token?service=corral-registry&scope=repository:corral/hello:pull,push", None,
                  {"Authorization": basic})
claims = json.loads(body)["token"].split(".")[1] if code == 200 else ""
out["registry"] = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["access"][0]["actions"] \
    if claims else code
try:
    os.mkdir("/var/lib/corral-podman/59999")
    out["squat"] = "made"
except OSError as e:
    out["squat"] = type(e).__name__
print("ATTACK=" + json.dumps(out))
"""


@pytest.mark.attack
def test_attack_from_her_notebook(bench, tmp_path):
    from playwright.sync_api import sync_playwright
    stop_server(bench, "alice")
    ssh(bench, "login1", f"rm -f {PLANTED}-*")
    cell = f"HOSTILE = {json.dumps(HOSTILE)}\n{ATTACK}"
    as_alice(bench, "login1", f"printf '%s' {shlex.quote(notebook(cell))} > ~/attack.ipynb")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_context(ignore_https_errors=True, viewport={"width": 1100, "height": 800}).new_page()
            start_lab(page, bench)
            text = run_first_cell(page, hub(bench), "attack.ipynb", "ATTACK=", timeout_ms=30000)
        finally:
            browser.close()
            stop_server(bench, "alice")  # the hub cancels and queries her job: what she planted would run now
            as_alice(bench, "login1", "rm -f ~/attack.ipynb", check=False)
    got = json.loads(text.strip().split("ATTACK=", 1)[1])
    planted = ssh(bench, "login1", f"ls -l {PLANTED}-* 2>/dev/null", check=False).stdout
    assert got["uid"] == 2001 and got["job"], got  # her kernel, in her job
    assert (got["batchspawner"], got["registry"], got["squat"], planted) == (403, ["pull"], "PermissionError", ""), got
    assert got["bob"] in (403, 404), got  # JupyterHub answers 404 for a user the token may not see
    assert got["users"][0] == 403 or "bob" not in got["users"][1], got
