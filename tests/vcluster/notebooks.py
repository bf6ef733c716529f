"""Notebooks on the workbench cluster (tests/vcluster/test_workbench.py runs these on its `bench`): the
hub over HTTPS with the cluster CA's certificate, its secrets kept, alice's JupyterLab as a Slurm job on
a GPU node driven in Debian's chromium through Playwright, and the form refusing what her QOS does not
allow. Not collected on its own (no test_ prefix): its tests need test_workbench's cluster."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import requests

from tests.vcluster.conftest import ssh
from tests.vcluster.test_users import as_alice

PORT = 8443
CELL = ("import os\n"
        "exec(open(os.environ['LMOD_PKG'] + '/init/env_modules_python.py').read())\n"
        "module('load', 'openmpi', 'cuda')\n"
        "print('CVD=' + os.environ.get('CUDA_VISIBLE_DEVICES', '-'), 'JOB=' + os.environ.get('SLURM_JOB_ID', '-'),"
        " 'MPI_HOME=' + os.environ.get('MPI_HOME', '-'), 'CUDA_HOME=' + os.environ.get('CUDA_HOME', '-'))")
NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                       "source": CELL}],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


def hub(vc) -> str:
    return f"https://{vc.node('login1').node.address}:{PORT}"


def secret(vc, name: str) -> str:
    return (Path(vc.cluster.state_dir) / "secrets" / name).read_text().strip()


def ca_file(vc) -> str:
    return str(Path(vc.cluster.state_dir) / "secrets" / "ca" / "ca.pem")


def session(vc, user: str = "alice", password: str | None = None) -> requests.Session:
    """`user` logged in to the hub over HTTPS (alice: with corral's password for her), trusting the cluster
    CA alone."""
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would replace `verify`
    s.verify = ca_file(vc)
    s.get(hub(vc) + "/hub/login", timeout=30)
    r = s.post(hub(vc) + "/hub/login", timeout=30, data={
        "username": user, "password": password or secret(vc, "password-alice"),
        "_xsrf": s.cookies.get("_xsrf", path="/hub/")})
    assert r.ok and "/hub/login" not in r.url, (r.status_code, r.url)
    return s


def spawner_jobs(vc, user: str = "alice") -> list[str]:
    out = ssh(vc, "ctl", f"squeue -h -u {user} -n spawner-jupyterhub -o '%i %T %N'").stdout
    return [line for line in out.splitlines() if line.strip()]


def stop_server(vc, user: str) -> None:
    """The user's server stopped through the hub (as an admin would), its job gone: nothing left behind."""
    if not spawner_jobs(vc, user):
        return
    s = session(vc) if user == "alice" else None
    if s is not None:
        s.delete(hub(vc) + "/hub/api/users/alice/server", timeout=60,
                 headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/")})
    wait_for(lambda: spawner_jobs(vc, user) == [], f"{user}'s server's job to end", timeout=90)


def wait_for(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def notebook(source: str) -> str:
    """A notebook of one code cell, as JSON."""
    return json.dumps({**NOTEBOOK, "cells": [{**NOTEBOOK["cells"][0], "source": source}]})


def start_lab(page, bench, gpus: int = 1, shot=None, user: str = "alice", password: str | None = None) -> None:
    """`user` (alice: with corral's password for her) logs in to the hub in the browser and starts her JupyterLab on
    the gpu partition with `gpus` GPUs (the spawn form; a screenshot of it at `shot`), until her lab's page loads."""
    page.goto(hub(bench) + "/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password or secret(bench, "password-alice"))
    page.click("#login_submit")
    page.wait_for_selector("#gpus", timeout=30000)  # the spawn form, bounded by the spec
    if shot is not None:
        page.screenshot(path=str(shot), full_page=True)
    page.select_option("#partition", "gpu")
    page.fill("#gpus", str(gpus))
    page.click("#spawn_form [type=submit]")
    page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=180000)


def run_first_cell(page, base: str, name: str, marker: str, timeout_ms: int = 8000) -> str:
    """alice's notebook ~/NAME opened in her running JupyterLab, its first cell run in her kernel (in her job) until
    its output shows `marker`; that output's text."""
    from playwright.sync_api import expect
    page.goto(base + f"/user/alice/lab/tree/{name}?reset")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000)
    out = page.locator(".jp-NotebookPanel .jp-OutputArea-output").first
    for _ in range(8):  # a run asked before the kernel's channels are up is dropped: ask again
        dialog = page.locator(".jp-Dialog")
        if dialog.count():  # JupyterLab may ask something first (e.g. which kernel): take its default
            dialog.locator(".jp-mod-accept").first.click(timeout=5000)
        page.locator(".jp-NotebookPanel .jp-Cell .cm-content").first.click(timeout=10000)
        page.keyboard.press("Control+Enter")
        try:
            expect(out).to_contain_text(marker, timeout=timeout_ms)
            break
        except AssertionError:
            continue
    return out.inner_text()


def test_the_hub_serves_https_with_the_cluster_ca(bench):
    r = requests.get(hub(bench) + "/hub/login", verify=ca_file(bench), timeout=30)
    assert r.status_code == 200 and "jupyterhub" in r.text.lower()
    # every node trusts the cluster CA (ca trust): a compute node's own Python verifies the hub
    probe = (f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{hub(bench)}/hub/api', "
             "timeout=10).status)\"")
    assert ssh(bench, "gpu01", probe).stdout.strip() == "200"
    modes = ssh(bench, "login1", "stat -c '%n %a %U' /etc/corral/jupyterhub/cookie_secret "
                                 "/etc/corral/jupyterhub/hub.env /etc/corral/jupyterhub/tls/hub.key").stdout.split("\n")
    assert modes[:3] == ["/etc/corral/jupyterhub/cookie_secret 600 corral-jupyterhub",  # the hub reads them
                         "/etc/corral/jupyterhub/hub.env 600 root",  # systemd reads it for the hub
                         "/etc/corral/jupyterhub/tls/hub.key 600 corral-jupyterhub"], modes
    token = secret(bench, "jupyterhub-proxy-token")
    argv = ssh(bench, "login1", "ps -eo args").stdout
    assert "configurable-http-proxy" in argv and token not in argv  # the proxy's token comes from its environment
    journal = "\n".join(p.read_text(errors="replace") for p in Path(bench.cluster.state_dir).rglob("*")
                        if p.is_file() and "secrets" not in p.parts)
    assert token not in journal and secret(bench, "password-alice") not in journal
    # Prometheus scrapes the hub's metrics (the spawn-failure alert reads them)
    from tests.vcluster.test_monitoring import query
    wait_for(lambda: [r["value"][1] for r in query(bench, 'up{job="jupyterhub"}')["data"]["result"]] == ["1"],
             "Prometheus to scrape the hub", timeout=90)
    counts = query(bench, "jupyterhub_server_spawn_duration_seconds_count")["data"]["result"]
    assert {r["metric"]["status"] for r in counts} >= {"success", "failure"}, counts


def test_the_form_refuses_what_her_qos_does_not_allow(bench):
    s = session(bench)
    form = s.get(hub(bench) + "/hub/spawn", timeout=30)
    assert 'name="gpus"' in form.text and "h100 (partitions: gpu)" in form.text
    r = s.post(hub(bench) + "/hub/spawn", timeout=60, allow_redirects=False, data={
        "_xsrf": s.cookies.get("_xsrf", path="/hub/"), "partition": "gpu", "gpu_type": "h100", "gpus": "3",
        "cpus": "1", "memory_gb": "0", "time": "0:30:00"})
    assert "GPUs: 3 asked, but QOS notebook allows you 2 at a time (MaxTRESPerUser gres/gpu)" in r.text, r.text[-2000:]
    assert spawner_jobs(bench) == []
    user = s.get(hub(bench) + "/hub/api/users/alice", timeout=30,
                 headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/")}).json()
    assert not user["servers"], user


def test_alice_gets_a_gpu_notebook_in_a_browser(bench, tmp_path):
    from playwright.sync_api import expect, sync_playwright
    as_alice(bench, "login1", f"printf '%s' {shlex.quote(notebook(CELL))} > ~/check.ipynb")
    base = hub(bench)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_context(ignore_https_errors=True, viewport={"width": 1100, "height": 800}).new_page()
            start_lab(page, bench, shot=tmp_path / "spawn-form.png")
            jobs = spawner_jobs(bench)
            assert len(jobs) == 1 and jobs[0].split()[1] == "RUNNING" and jobs[0].split()[2] in ("gpu01", "gpu02"), jobs
            text = run_first_cell(page, base, "check.ipynb", "CVD=")
            job = jobs[0].split()[0]
            assert re.fullmatch(rf"CVD=\d JOB={job} MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi "
                                r"CUDA_HOME=/usr/local/cuda-12\.4", text.strip()), text
            # the stop button works once the page's script has bound it: clicked before (a busy machine), nothing
            # happens; the hub hides it when the stop went through
            page.goto(base + "/hub/home", wait_until="networkidle")
            page.click("#stop")
            expect(page.locator("#stop")).to_be_hidden(timeout=60000)
            wait_for(lambda: spawner_jobs(bench) == [], "her server's job to end", timeout=90)
        finally:
            browser.close()
            stop_server(bench, "alice")  # whatever failed above: the next test starts without her server
    state = ssh(bench, "ctl", f"sacct -n -X -P -j {job} -o State").stdout.strip()
    assert state.startswith(("CANCELLED", "COMPLETED")), state


def test_a_directory_user_logs_in_to_the_hub_and_gets_a_server(bench):
    """bob is only in the directory: PAM (pam_sss) checks his directory password; in the browser his 1-GPU server is
    his job.
    A directory user's Slurm association and home are the site's to make (sacctmgr, the home server): the
    test makes them as a site would."""
    from tests.vcluster.test_workbench import BOB_PASSWORD
    assert ssh(bench, "login1", "getent passwd bob").stdout.split(":")[2] == "3001"
    ssh(bench, "ctl", "sacctmgr -i add user bob account=research >/dev/null; "
                      "install -d -o 3001 -g 3001 -m 700 /srv/nfs/home/bob")
    bad = requests.Session()
    bad.trust_env, bad.verify = False, ca_file(bench)
    bad.get(hub(bench) + "/hub/login", timeout=30)
    r = bad.post(hub(bench) + "/hub/login", timeout=30, data={
        "username": "bob", "password": "not-his", "_xsrf": bad.cookies.get("_xsrf", path="/hub/")})
    assert "/hub/login" in r.url and "Invalid username or password" in r.text  # a wrong password: refused
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:  # in the browser, as alice: his JupyterLab with 1 GPU, as his Slurm job
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_context(ignore_https_errors=True).new_page()
            start_lab(page, bench, gpus=1, user="bob", password=BOB_PASSWORD)
            jobs = spawner_jobs(bench, "bob")
            assert len(jobs) == 1 and jobs[0].split()[1] == "RUNNING", jobs
            got = ssh(bench, "ctl", f"squeue -h -j {jobs[0].split()[0]} -o '%u|%b'").stdout.strip()
        finally:
            browser.close()
    assert re.fullmatch(r"bob\|\S*gpu(:\w+)?:1", got), got
    s = session(bench, "bob", BOB_PASSWORD)
    xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/")}
    assert s.delete(hub(bench) + "/hub/api/users/bob/server", headers=xsrf, timeout=60).status_code in (202, 204)
    wait_for(lambda: spawner_jobs(bench, "bob") == [], "bob's server's job to end", timeout=90)


def test_validates_notebook_check_starts_runs_and_stops_a_server(bench):
    """`corral validate`'s notebook check on its own (the rest of validate is other modules' to prove)."""
    from corral.checks.notebook import notebook_check
    from corral.checks.validate import remote
    from corral.engine.remote import shared_connections
    stop_server(bench, "alice")
    with shared_connections():
        check = notebook_check(bench.cluster, remote(bench.cluster), "ctl", 150)
    assert check.status == "OK", check.message
    assert re.fullmatch(r"alice's server ran as job \d+ on gpu0[12] with GPU \d; a cell ran in its kernel; "
                        r"stopped, job \d+ ended", check.message), check.message
    assert spawner_jobs(bench) == []
