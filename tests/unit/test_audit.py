"""`corral audit`'s pure half: the facts command's output (captured from a converged virtual cluster of `corral up`,
tests/fixtures/audit/) parsed, and each entry judged against the declarations. The live half (the same command
over SSH, a planted listener and root process) is tests/vcluster/audit.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.checks.audit import evaluate, evaluate_node
from corral.checks.audit_facts import parse
from corral.components.views import declared, declared_daemons
from corral.spec.loader import load_text

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "audit"
SPEC = (HERE / "cluster.yaml").read_text()


def cluster(extra: str = ""):
    return load_text(SPEC + extra, "cluster.yaml")


def facts(node: str, *more: str) -> dict:
    return parse((HERE / f"{node}.txt").read_text().splitlines() + list(more))


def findings(c, node: str, *more: str) -> list[str]:
    items = evaluate_node(c, c.node(node), facts(node, *more))
    return [f"{i.kind}: {i.what}" for i in items if i.declared is None]


def test_the_captured_output_is_understood():
    f = facts("ctl")
    assert f["unparsed"] == 0 and len(f["self"]) == 4
    assert {p["comm"] for p in f["procs"].values()} >= {"systemd", "slurmctld", "slurmdbd", "mariadbd", "munged"}
    ports = {(e["address"], e["port"]) for e in f["listen"]}
    assert ("127.0.0.1", 3306) in ports and ("0.0.0.0", 6817) in ports and ("::", 22) in ports
    assert all(e["pids"] for e in f["listen"])
    su = next(s for s in f["suid"] if s["path"] == "/usr/bin/su")
    assert su == {"mode": "4755", "owner": "root:root", "package": "util-linux", "state": "packaged", "path": "/usr/bin/su"}
    assert ("/etc/sudoers", "root\tALL=(ALL:ALL) ALL") in f["sudo"] and f["sudo_group"] == []


def test_a_converged_cluster_has_nothing_undeclared_and_says_why_for_each_entry():
    c = cluster()
    audit = evaluate(c, {"ctl": facts("ctl"), "gpu01": facts("gpu01")}, {})
    assert audit.ok and audit.findings == [], [i.what for i in audit.findings]
    why = {(i.node, i.what.split(" (")[0]): i.declared for i in audit.items}
    assert why[("gpu01", "slurmd")].startswith("slurmd starts each job step as its user")
    assert why[("ctl", "tcp 127.0.0.1:3306 mariadbd")] == "mariadb.service: slurmdbd on this node"
    assert not any(i.what.startswith(("sh ", "ps ", "awk ", "find ")) for i in audit.items)  # the audit itself


def test_a_planted_listener_and_root_process_are_findings():
    c = cluster()
    got = findings(c, "gpu01", "PROC 4242 1 0 root planted.service python3",
                   'LISTEN tcp 0.0.0.0:9999 users:(("python3",pid=4242,fd=3))')
    assert got == ["listener: tcp 0.0.0.0:9999 python3 (planted.service, root)",
                   "root process: python3 (pid 4242, planted.service)"]
    # a declared daemon's process in a unit of its own is no longer that daemon's; a declared port on a wider
    # address than declared is not the declared listener
    assert findings(c, "gpu01", "PROC 4243 1 0 root run-u7.service slurmd") == [
        "root process: slurmd (pid 4243, run-u7.service)"]
    wide = findings(c, "ctl", 'LISTEN tcp 0.0.0.0:9090 users:(("prometheus",pid=2545,fd=7))')
    assert wide == ["listener: tcp 0.0.0.0:9090 prometheus (prometheus.service, prometheus)"]


def test_users_own_listeners_are_theirs_but_not_on_a_privileged_port():
    c = cluster()
    assert findings(c, "gpu01", "PROC 5000 4999 2001 alice slurmd.service python3",
                    'LISTEN tcp 0.0.0.0:8888 users:(("python3",pid=5000,fd=3))') == []
    assert findings(c, "gpu01", "PROC 5000 4999 2001 alice slurmd.service python3",
                    'LISTEN tcp 0.0.0.0:80 users:(("python3",pid=5000,fd=3))') == [
        "listener: tcp 0.0.0.0:80 python3 (slurmd.service, alice)"]


def test_setuid_files_open_directories_and_sudo_rules_beyond_the_declared_are_findings():
    c = cluster()
    got = findings(c, "gpu01", "SUID 4755 root:root - - /usr/local/bin/rootme",
                   "SUID 4755 root:root util-linux modified /usr/bin/su2", "OPEN /srv/scratch",
                   "SUDO /etc/sudoers.d/extra alice ALL=(ALL) NOPASSWD: ALL", "SUDOERS alice")
    assert got == ["setuid: /usr/local/bin/rootme (4755 root:root; not from any package)",
                   "setuid: /usr/bin/su2 (4755 root:root; from package util-linux, modified)",
                   "open directory: /srv/scratch (world-writable, no sticky bit)",
                   "sudo: /etc/sudoers.d/extra: alice ALL=(ALL) NOPASSWD: ALL", "sudo: group sudo: alice (may become root)"]


@pytest.mark.attack
def test_cron_and_at_on_a_job_confined_compute_node_are_roots_alone():
    c = cluster()
    assert findings(c, "gpu01", "HAS cron", "HAS atd") == ["cron: cron: everyone", "at: at: everyone"]
    assert findings(c, "gpu01", "HAS cron", "ACL /etc/cron.allow root", "HAS atd", "ACL /etc/at.allow root") == []
    assert findings(c, "gpu01", "HAS cron", "ACL /etc/cron.allow root", "CRONTAB alice", "CRONTAB root") == [
        "cron: crontab of alice"]
    assert findings(c, "ctl", "HAS cron") == []  # users do not log in there: listed, not a finding


def test_the_sites_own_daemons_are_declared_in_the_spec():
    extra = ("audit:\n  declared:\n    - {roles: [controller], unit: slapd.service, user: openldap,\n"
             "       why: the site's directory, listens: [{port: 389, who: SSSD on every node}]}\n")
    line = 'LISTEN tcp 0.0.0.0:389 users:(("slapd",pid=478,fd=7))'
    more = ("PROC 478 1 100 openldap slapd.service slapd", line)
    assert findings(cluster(), "ctl", *more) == ["listener: tcp 0.0.0.0:389 slapd (slapd.service, openldap)"]
    assert findings(cluster(extra), "ctl", *more) == []
    assert findings(cluster(extra), "gpu01", "PROC 478 1 100 openldap slapd.service slapd", line) != []


@pytest.mark.parametrize("bad", ["{unit: 'a b', user: x, why: y}", "{unit: x.service, user: Root, why: y}",
                                 "{unit: x.service, user: x, why: 'a\\nb'}",
                                 "{unit: x.service, user: x, why: y, root: [averyveryverylongname]}",
                                 "{unit: x.service, user: x, why: y, listens: [{port: 70000, who: z}]}"])
def test_a_bad_site_declaration_is_a_located_error(bad):
    from corral.errors import SpecError
    with pytest.raises(SpecError) as err:
        cluster(f"audit:\n  declared:\n    - {bad}\n")
    assert all(p.where.startswith("cluster.yaml:") for p in err.value.problems), err.value.problems


def test_every_daemon_a_removed_node_stops_is_declared_where_it_runs():
    """The declarations cannot drift from removal's list: each unit a component stops is one it declares."""
    mounts = SPEC.replace("    - {path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}\n",
                          "    - {path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}\n"
                          "    - {path: /sw, export: /srv/nfs/home}\n")
    mounts = mounts.replace("slurm:\n", "slurm:\n  rest: {}\n")
    c = load_text(mounts + "images:\n  podman: true\n  registry: {node: ctl}\nsoftware: {}\nworkbench:\n  jupyterhub: {}\n",
                  "cluster.yaml")
    units = {d.unit for n in c.nodes for d in declared_daemons(c, n)}
    stops = {f"{u}.service" for comp in declared(c) for units_ in comp.stops.values() for u in units_}
    real_only = {"nvidia-dcgm.service", "corral-dcgm-exporter.service", "grafana-server.service", "corral-mig.service"}
    assert stops - real_only <= units, stops - real_only - units


def test_every_declared_root_process_name_is_one_ps_can_show():
    """ps shows a process's comm, at most 15 characters: a longer declared name would never match its process."""
    from dataclasses import replace
    c = cluster("images:\n  podman: true\n  registry: {node: ctl}\n")
    real = replace(c, spec=c.spec.model_copy(update={"virtual": None}))  # the daemons of real servers too
    names = {r for n in real.nodes for d in declared_daemons(real, n) for r in d.root if r != "*"}
    assert names and all(len(r) <= 15 for r in names), sorted(r for r in names if len(r) > 15)


@pytest.mark.attack
@pytest.mark.parametrize("scope", [None, ["ctl", "10.213.0.10"]])
def test_a_cluster_ca_without_name_constraints_is_a_finding(tmp_path, scope):
    """Security review 3, N16, for a CA made before the constraints: every node trusts it for any name."""
    from corral import site_ca
    c = cluster(f"state_dir: {tmp_path}\nimages:\n  registry: {{node: ctl}}\n")
    assert c.state_dir == tmp_path
    assert evaluate(c, {}, {}).items == []  # no CA made yet: nothing to judge, and nothing made
    assert not (tmp_path / "secrets").exists()
    site_ca.authority(tmp_path, c.name, scope)
    [item] = evaluate(c, {}, {}).items
    assert (item.node, item.kind) == ("control host", "trust")
    assert (item.declared is None) == (scope is None), item
    assert ("move " in item.what) == (scope is None), item.what
