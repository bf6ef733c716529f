"""`corral audit` on test_workbench's cluster, the one with every feature on (the hub, the registry and its cache,
EasyBuild, podman, enroot and pyxis, LDAP through SSSD, clean jobs, monitoring), run as an operator runs it: the
`corral` process from a shell. Every listener, root process, setuid file, sudo rule and cron/at permission on every
node is declared (the site's own directory server by the spec's `audit.declared`); a root process planted on
gpu01, listening on a port, is reported and makes it exit 1. Not collected on its own (no test_ prefix)."""

from __future__ import annotations

import pytest
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.vcluster.conftest import ssh

CORRAL = str(Path(sys.executable).with_name("corral"))


def audit(vc, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([CORRAL, "audit", "--json", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "CORRAL_SPEC": str(vc.cluster.path)})
    return proc.returncode, json.loads(proc.stdout)


def test_audit_finds_nothing_undeclared_on_the_cluster_with_every_feature(bench):
    rc, got = audit(bench)
    undeclared = [f"{i['node']} {i['kind']}: {i['what']}" for i in got["items"] if not i["declared"]]
    assert (rc, got["findings"], undeclared, got["unreachable"]) == (0, 0, [], {}), undeclared
    rule = [i for i in got["items"] if i["node"] == "login1" and i["kind"] == "sudo" and "Runas_Alias" in i["what"]]
    assert len(rule) == 1 and rule[0]["what"].endswith(", %bob") and rule[0]["why"].startswith("the notebook hub's")
    assert any(i["node"] == "ctl" and i["why"] == "slapd.service: SSSD on every node" for i in got["items"])
    assert {i["node"] for i in got["items"]} == {"ctl", "gpu01", "gpu02", "login1", "control host"}
    # the cluster's CA every node trusts: made with name constraints (security review 3, N16)
    [ca] = [i for i in got["items"] if i["node"] == "control host"]
    assert ca["kind"] == "trust" and ca["why"] == "name-constrained to the cluster's names and addresses", ca


@pytest.mark.attack
def test_a_planted_root_listener_is_reported_and_fails_the_audit(bench):
    ssh(bench, "gpu01", "systemd-run --unit=corral-planted python3 -m http.server 9999")
    try:
        rc, got = audit(bench, "--node", "gpu01")
    finally:
        ssh(bench, "gpu01", "systemctl stop corral-planted", check=False)
    undeclared = sorted(f"{i['kind']}: {i['what']}" for i in got["items"] if not i["declared"])
    assert rc == 1 and len(undeclared) == 2, undeclared
    assert undeclared[0].startswith("listener: tcp 0.0.0.0:9999 python3 (corral-planted.service, root)")
    assert undeclared[1].startswith("root process: python3 (pid ") and "corral-planted.service" in undeclared[1]
