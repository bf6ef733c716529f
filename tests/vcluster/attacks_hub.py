"""The attacker's cases against the notebook hub (security review 3: N1 critical, N2 high, N10), run as alice on
test_workbench's cluster, each one a reproduction that must fail to escalate:

- the hub and its proxy run as the hub's own user, never root (`ps` on login1);
- from inside her notebook's job, alice takes her server's token from its environment and POSTs to batchspawner's
  API the commands and prefix a root hub would run (the review's exploit): refused, and when her server is stopped
  (the hub cancels and queries her job) nothing she planted runs on login1;
- a REST spawn carrying batchspawner's template values (`runtime`, `options`, `prologue`) gets the checked request
  only: the job's time limit is the one she asked through the form's keys, nothing planted runs;
- validate's notebook check shows her server a token of hers alone, deleted after the check: a config in her
  ~/.jupyter that records every token her server is shown gets nothing that reads other users or still works.

Not collected on its own (no test_ prefix): its tests need test_workbench's cluster."""

from __future__ import annotations

import pytest
import json
import re
import shlex

import requests

from tests.vcluster.conftest import ssh
from tests.vcluster.notebooks import hub, session, spawner_jobs, stop_server, wait_for
from tests.vcluster.test_users import as_alice

PLANTED = "/run/corral-planted"  # what a root hub would have made through the commands below
HOSTILE = {"port": 8888, "exec_prefix": f"touch {PLANTED}-prefix;",
           "batch_query_cmd": f"squeue -h -j {{job_id}} -o '%T %B'; touch {PLANTED}-query",
           "batch_cancel_cmd": f"scancel {{job_id}}; touch {PLANTED}-cancel", "req_username": "root"}
# run as alice inside her server's job: her server's token from its environment, then batchspawner's API
STEAL = r"""
import json, os, sys, urllib.error, urllib.request
token = api = None
for pid in os.listdir("/proc"):
    try:
        env = dict(e.split(b"=", 1) for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in e)
    except (OSError, ValueError):
        continue
    if env.get(b"JUPYTERHUB_USER") == b"alice" and b"JUPYTERHUB_API_TOKEN" in env:
        token, api = env[b"JUPYTERHUB_API_TOKEN"].decode(), env[b"JUPYTERHUB_API_URL"].decode()
        break
def post(body):
    req = urllib.request.Request(api + "/batchspawner", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "token " + token, "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req, timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code
print(json.dumps({"found": token is not None, "hostile": post(json.loads(sys.argv[1])), "port": post({"port": 8888})}))
"""
# alice's own server config: records every token her server is shown (as a server she controls could)
RECORDER = r"""
import os
import tornado.web
_init = tornado.web.RequestHandler.__init__
def _record(self, application, request, **kwargs):
    auth = request.headers.get("Authorization", "")
    if auth:
        with open(os.path.expanduser("~/.seen-tokens"), "a") as f:
            f.write(auth.split()[-1] + "\n")
    _init(self, application, request, **kwargs)
tornado.web.RequestHandler.__init__ = _record
"""


def _start(vc, s: requests.Session, options: dict) -> str:
    """alice's server started through the hub's REST API with `options`; its job id once it is ready."""
    xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/")}
    r = s.post(hub(vc) + "/hub/api/users/alice/server", json=options, headers=xsrf, timeout=60)
    assert r.status_code in (201, 202), (r.status_code, r.text[-500:])
    wait_for(lambda: (s.get(hub(vc) + "/hub/api/users/alice", headers=xsrf, timeout=30).json()["servers"]
                      .get("", {}).get("ready")), "alice's server", timeout=150)
    jobs = spawner_jobs(vc)
    assert len(jobs) == 1 and jobs[0].split()[1] == "RUNNING", jobs
    return jobs[0].split()[0]


@pytest.mark.attack
def test_the_hub_and_its_proxy_do_not_run_as_root(bench):
    ps = ssh(bench, "login1", "ps -eo user:32,args").stdout.splitlines()
    procs = [line for line in ps if "bin/jupyterhub -f" in line or "configurable-http-proxy --" in line]
    assert len(procs) >= 2 and {line.split()[0] for line in procs} == {"corral-jupyterhub"}, procs
    # what it owns: its state and the secrets it reads; the tokens' file stays root's (systemd reads it)
    modes = ssh(bench, "login1", "stat -c '%n %a %U' /var/lib/corral-jupyterhub /var/lib/corral-jupyterhub/"
                                 "jupyterhub.sqlite /etc/corral/jupyterhub/hub.env /etc/sudoers.d/corral-jupyterhub"
                ).stdout.split("\n")
    assert modes[:4] == ["/var/lib/corral-jupyterhub 700 corral-jupyterhub",
                         "/var/lib/corral-jupyterhub/jupyterhub.sqlite 600 corral-jupyterhub",
                         "/etc/corral/jupyterhub/hub.env 600 root", "/etc/sudoers.d/corral-jupyterhub 440 root"], modes


@pytest.mark.attack
def test_attack_a_servers_token_cannot_change_what_the_hub_runs(bench):
    """N1 (critical): the review's exploit, from inside her notebook's job."""
    stop_server(bench, "alice")
    ssh(bench, "login1", f"rm -f {PLANTED}-*")
    job = _start(bench, session(bench), {"partition": "gpu", "gpus": 0, "cpus": 1, "time": "0:20:00"})
    try:
        as_alice(bench, "login1", f"printf '%s' {shlex.quote(STEAL)} > ~/.steal.py")
        got = as_alice(bench, "login1", f"srun --jobid={job} --overlap -N1 -n1 python3 ~/.steal.py "
                                        f"{shlex.quote(json.dumps(HOSTILE))} </dev/null").stdout
        answer = json.loads(got.strip().splitlines()[-1])
    finally:
        stop_server(bench, "alice")  # the hub cancels and queries her job: what she planted would run now
        as_alice(bench, "login1", "rm -f ~/.steal.py", check=False)
    planted = ssh(bench, "login1", f"ls -l {PLANTED}-* 2>/dev/null", check=False).stdout
    # her token was there to take; the hub took nothing from it: her server has started, so not even a port
    # (while it starts, a port alone: tests/unit/test_notebook_slurm.py); batchspawner's handler said 200
    assert (answer, planted) == ({"found": True, "hostile": 403, "port": 403}, ""), (answer, planted)


@pytest.mark.attack
def test_attack_a_rest_spawn_sets_nothing_but_the_checked_request(bench):
    """N10: batchspawner's template values in a REST spawn (`runtime`, `options`, `prologue`) reach nothing."""
    stop_server(bench, "alice")
    job = _start(bench, session(bench), {"partition": "gpu", "gpus": 0, "cpus": 1, "time": "0:20:00",
                                         "runtime": "30-00:00:00", "options": "--comment=planted",
                                         "prologue": "touch $HOME/.planted-prologue"})
    try:
        limit, comment = ssh(bench, "ctl", f"squeue -h -j {job} -o '%l|%k'").stdout.strip().split("|")
        assert limit == "20:00" and comment in ("(null)", ""), (limit, comment)
    finally:
        stop_server(bench, "alice")
    assert ".planted-prologue" not in as_alice(bench, "login1", "ls -a ~").stdout.split()


@pytest.mark.attack
def test_attack_validates_check_shows_her_server_no_token_beyond_her_own(bench):
    """N2 (high): her server records every token it is shown during validate's notebook check; none reads other
    users, and none works after the check."""
    from corral.checks.notebook import notebook_check
    from corral.checks.validate import remote
    from corral.engine.remote import shared_connections
    stop_server(bench, "alice")
    as_alice(bench, "login1", f"rm -f ~/.seen-tokens; mkdir -p ~/.jupyter && printf '%s' {shlex.quote(RECORDER)} "
                              "> ~/.jupyter/jupyter_server_config.py")
    try:
        with shared_connections():
            check = notebook_check(bench.cluster, remote(bench.cluster), "ctl", 150)
        assert check.status == "OK", check.message
        seen = set(as_alice(bench, "login1", "cat ~/.seen-tokens", check=False).stdout.split())
    finally:
        as_alice(bench, "login1", "rm -f ~/.jupyter/jupyter_server_config.py ~/.seen-tokens", check=False)
        stop_server(bench, "alice")
    assert seen, "her server recorded no token: the recorder did not run"
    api = f"http://{bench.node('login1').node.address}:8081/hub/api"
    for token in seen:  # another user's record (bob's), and the token itself once the check is over
        head = {"Authorization": f"token {token}"}
        assert requests.get(f"{api}/users/bob", headers=head, timeout=30).status_code == 403, token[:6]
        assert requests.get(f"{api}/user", headers=head, timeout=30).status_code == 403, token[:6]
    assert re.fullmatch(r"alice's server ran as job \d+ .*", check.message), check.message
