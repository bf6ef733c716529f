"""Daemons that come back (render/restart.py): every drop-in parses as systemd reads it (with
`systemd-analyze verify` where it is installed), every service corral manages has a restart policy or
a stated reason for none (a daemon added later without one fails here), and every deploy installs the
drop-in before it starts its daemon, without a restart of slurmd when only the policy changed.
The operation itself: tests/operations/restart_policy/."""

from __future__ import annotations

import configparser
import importlib
import pkgutil
import shutil
import subprocess
from pathlib import Path

import pytest
from pyinfra.api import Config, State
from pyinfra.api.deploy import add_deploy

import corral.deploy
from corral.engine import run_context
from corral.deploy import nodestate, operations
from corral.render import dcgm_exporter
from corral.render import slurm_exporter
from corral.render import jupyterhub, registry_auth
from corral.render.restart import (DROPIN_NAME, EXEMPT, IN_UNIT, POLICIES, UNIT_DIR, dropin_path, render_restart_dropin,
                                   service_lines, unit_lines)

DROPIN_UNITS = sorted(set(POLICIES) - IN_UNIT)
LDAP_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ldap"
SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "spec" / "slurm_valid.yaml"


def parse(text: str, strict: bool = True) -> configparser.ConfigParser:
    """systemd's INI as far as these files go: sections, Key=Value, # comments; a key twice is an error
    (unless not `strict`: list settings such as After= may be given twice, the last one read wins here)."""
    ini = configparser.ConfigParser(interpolation=None, strict=strict, delimiters=("=",), comment_prefixes=("#",),
                                    empty_lines_in_values=False)
    ini.optionxform = str  # systemd keys are case-sensitive
    ini.read_string(text)
    return ini


# --- the texts ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", DROPIN_UNITS)
def test_dropin_parses_with_the_start_limit_in_unit_and_restart_in_service(unit):
    text = render_restart_dropin(unit)
    ini = parse(text)
    p = POLICIES[unit]
    assert ini.sections() == ["Unit", "Service"]
    network = {"Wants": "network-online.target", "After": "network-online.target"} if p.binds else {}
    assert dict(ini["Unit"]) == {"StartLimitIntervalSec": str(p.interval_s), "StartLimitBurst": str(p.burst), **network}
    assert dict(ini["Service"]) == {"Restart": "on-failure", "RestartSec": str(p.restart_sec)}
    assert text.startswith("# Managed by corral") and text.endswith("\n")
    assert all(line.startswith("#") or "\n" not in line for line in text.splitlines())  # one-line comments


def test_every_daemon_bound_to_the_cluster_address_starts_after_the_network():
    """A daemon listening on the node's address that starts before it is configured fails at boot
    ("cannot assign requested address"): each one corral binds so is ordered after network-online.target."""
    bound = {"prometheus", "prometheus-alertmanager", "prometheus-node-exporter", "grafana-server",
             "corral-slurm-exporter", "corral-dcgm-exporter", "corral-jupyterhub", "docker-registry",
             "corral-registry-auth"}
    assert {u for u, p in POLICIES.items() if p.binds} == bound
    for unit in ("corral-slurm-exporter", "corral-dcgm-exporter"):  # corral's own units: in the unit text
        assert {"Wants=network-online.target", "After=network-online.target"} <= set(unit_lines(unit))
    assert not any("network-online" in line for line in unit_lines("slurmd"))


@pytest.mark.parametrize(("restart_sec", "interval_s", "burst"), [(10, 120, 10), (0, 120, 10), (2, 120, 2)])
def test_a_policy_whose_crash_loop_would_not_end_is_refused(restart_sec, interval_s, burst):
    """burst restarts RestartSec apart must fit in half the interval (Policy checks it when made, so
    every policy in POLICIES passed it at import): else a broken daemon would restart forever."""
    from corral.render.restart import Policy
    Policy(restart_sec=2, interval_s=120, burst=10, why="fits")
    with pytest.raises(ValueError, match="restart policy"):
        Policy(restart_sec=restart_sec, interval_s=interval_s, burst=burst, why="does not fit")


def test_the_daemons_slurm_needs_at_once_come_back_fastest():
    assert {u: POLICIES[u].restart_sec for u in ("slurmctld", "slurmd", "munge")} == dict.fromkeys(
        ("slurmctld", "slurmd", "munge"), 2)
    assert POLICIES["mariadb"].restart_sec == 5 and POLICIES["slurmdbd"].restart_sec == 5


def test_paths():
    assert dropin_path("slurmd") == "/etc/systemd/system/slurmd.service.d/corral-restart.conf"
    assert dropin_path("slurmd") != "/etc/systemd/system/slurmd.service.d/corral.conf"  # not slurmd's own drop-in
    with pytest.raises(KeyError, match="no restart policy for sshd"):
        render_restart_dropin("sshd")


def test_corral_units_carry_the_policy_in_their_own_text():
    from corral.render.registry import CACHE_POLICY, Instance, cache_unit
    cache = cache_unit(Instance("corral-registry-cache-5001", "/etc/docker/registry/cache-5001.yml", 5001, 5052,
                                "/var/lib/docker-registry/cache-5001", "nvcr.io"))
    assert all(line in cache.splitlines() for line in unit_lines(CACHE_POLICY) + service_lines(CACHE_POLICY))
    texts = {"corral-slurm-exporter": slurm_exporter.unit("10.0.0.10:9341"),
             "corral-dcgm-exporter": dcgm_exporter.unit("/usr/bin/dcgm-exporter", "10.0.0.11:9400", "/run/gpu-jobs"),
             "corral-jupyterhub": jupyterhub.unit("/sw/.corral/jupyterhub/0123456789abcdef", 8443),
             "corral-registry-auth": registry_auth.unit()}
    assert set(texts) == IN_UNIT
    for unit, text in texts.items():
        ini = parse(text, strict=False)  # After= twice: the unit's own order, and the network's (unit_lines)
        assert {k: ini["Unit"][k] for k in ("StartLimitIntervalSec", "StartLimitBurst")} == dict(
            line.split("=", 1) for line in unit_lines(unit) if line.startswith("StartLimit"))
        assert all(line in text.splitlines() for line in unit_lines(unit))
        assert {k: ini["Service"][k] for k in ("Restart", "RestartSec")} == dict(
            line.split("=", 1) for line in service_lines(unit))


# --- systemd's own reading -------------------------------------------------------------------------------------


STUB = "[Service]\nExecStart=/bin/true\n"


def _verify(d: Path, units: dict[str, str], dropins: dict[str, str], debug: bool = False):
    """`systemd-analyze verify` on the units (stubs or corral's unit texts) with the drop-ins beside them:
    the directory of the files named comes first in its unit path, their drop-in directories too."""
    d.mkdir(exist_ok=True)
    for unit, text in units.items():
        (d / f"{unit}.service").write_text(text)
    for unit, text in dropins.items():
        (d / f"{unit}.service.d").mkdir(exist_ok=True)
        (d / f"{unit}.service.d" / DROPIN_NAME).write_text(text)
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", **({"SYSTEMD_LOG_LEVEL": "debug"} if debug else {})}
    return subprocess.run(["systemd-analyze", "verify", "--man=no", *(str(d / f"{u}.service") for u in units)],
                          capture_output=True, text=True, timeout=60, env=env)


def _analyze(tmp_path: Path, units: dict[str, str], dropins: dict[str, str]) -> tuple[str, str]:
    """(what systemd says about the files: warnings, errors; nothing when it takes them as written, its
    dump of the units), or a skip where systemd-analyze cannot run."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here (the parser checks above still ran)")
    canary = _verify(tmp_path / "canary", {"corral-canary": STUB}, {})
    if canary.returncode != 0 or canary.stderr.strip():
        pytest.skip(f"systemd-analyze verify does not run cleanly here: {canary.stderr.strip()[-300:]}")
    proc = _verify(tmp_path / "units", units, dropins)
    dump = _verify(tmp_path / "units", units, {}, debug=True).stdout  # the dump goes to stdout
    return f"rc={proc.returncode}\n{proc.stderr}" if proc.returncode else proc.stderr.strip(), dump


def test_systemd_reads_every_dropin_and_corral_unit_as_written(tmp_path):
    units = dict.fromkeys(DROPIN_UNITS, STUB)
    units["corral-slurm-exporter"] = slurm_exporter.unit("10.0.0.10:9341")
    units["corral-dcgm-exporter"] = dcgm_exporter.unit("/bin/true", "10.0.0.11:9400", "/run/gpu-jobs")
    complaints, dump = _analyze(tmp_path, units, {u: render_restart_dropin(u) for u in DROPIN_UNITS})
    assert complaints == ""
    for unit in DROPIN_UNITS:  # systemd's dump of each unit: the drop-in loaded, its values taken
        assert f"DropIn Path: {tmp_path}/units/{unit}.service.d/{DROPIN_NAME}" in dump, unit
    assert dump.count("Restart: on-failure") == len(units)
    for seconds in {p.restart_sec for p in POLICIES.values()}:
        assert f"RestartSec: {seconds}s" in dump


def test_the_check_sees_a_start_limit_put_in_service(tmp_path):
    """systemd 252 ignores StartLimitIntervalSec= in [Service] ('Unknown key'): the check above would say so."""
    wrong = render_restart_dropin("slurmctld").replace("[Service]\n", "[Service]\nStartLimitIntervalSec=60\n")
    complaints, _ = _analyze(tmp_path, {"slurmctld": STUB}, {"slurmctld": wrong})
    assert "Unknown key 'StartLimitIntervalSec' in section [Service]" in complaints


# --- every service corral manages -------------------------------------------------------------------------------


def _import_deploys() -> None:
    for mod in pkgutil.iter_modules(corral.deploy.__path__):
        importlib.import_module(f"corral.deploy.{mod.name}")


def _resource_wants(directory: Path) -> list:
    """The Wants of the components declared as data (render/resources.py), on the golden many-features cluster
    (tests/golden/ops/features: every role, monitoring, the registry, podman)."""
    from corral.render import resources as r
    from corral.spec.loader import load
    from tests.unit.golden_ops import write_spec
    cluster = load(write_spec("features", directory))
    return [nodestate.Want(paths=r.paths(items), services=r.services(items))
            for items in _resource_items(cluster)]


def _resource_items(cluster) -> list:
    from corral.components.views import declared
    return [c.resources(cluster, n) for c in declared(cluster) if c.resources is not None
            for n in cluster.nodes if c.applies(cluster, n)]


def _declared_policies(directory) -> set[str]:
    """The services whose restart policy their component declares with them (render/resources.py Service.policy)."""
    from corral.render import resources as r
    from corral.spec.loader import load
    from tests.unit.golden_ops import write_spec
    cluster = load(write_spec("features", directory))
    out = {i.unit: i.policy for items in _resource_items(cluster) for i in items if isinstance(i, r.Service) and i.policy}
    assert all(p is POLICIES[u] for u, p in out.items() if u in POLICIES), "a declared policy differs from POLICIES'"
    return set(out)


def test_every_managed_service_has_a_restart_policy_or_a_reason(tmp_path):
    _import_deploys()
    wants = [w for w in (*nodestate._DECLARED, *_resource_wants(tmp_path)) if w.services]
    managed = {s for w in wants for s in w.services}
    assert {"slurmctld", "slurmd", "slurmdbd", "munge", "mariadb"} <= managed
    declared = _declared_policies(tmp_path / "declared")
    assert {"slurmrestd", "munge"} <= declared and not declared & set(EXEMPT)
    managed -= declared - set(POLICIES)  # a policy of its own (its drop-in: test_resources_model.py)
    missing = sorted(managed - set(POLICIES) - set(EXEMPT))
    assert not missing, (f"services corral manages without a restart policy: {missing}; give each one in "
                         "render/restart.py (POLICIES), or its reason in EXEMPT")
    assert not set(POLICIES) & set(EXEMPT)
    assert not (set(POLICIES) | set(EXEMPT)) - managed, "render/restart.py names services no deploy manages"
    assert all(len(why) > 20 for why in EXEMPT.values())
    for service in sorted(set(POLICIES) & managed):  # the file is in the Want that manages the service
        path = f"{UNIT_DIR}/{service}.service" if service in IN_UNIT else dropin_path(service)
        assert any(path in w.paths for w in wants if service in w.services), (
            f"{service}: {path} is not in the registered Want that manages it (the one snapshot must read it)")


# --- the deploys, planned offline ------------------------------------------------------------------------------


def _plan_calls(tmp_path: Path, monkeypatch) -> dict[str, list[tuple[str, dict, object]]]:
    """Every node's calls of operations.service/restart/restart_policy (op, kwargs, op meta), in order, for
    a cluster with every role, monitoring, Grafana and LDAP, planned without connecting (the users deploy
    reads accounts from the node: left out; it manages ssh, EXEMPT)."""
    from pyinfra import host

    from corral.deploy import components
    from corral.engine.inventory import build_inventory
    from corral.spec.loader import load_text

    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id_ed25519").write_text("not used: nothing connects\n")
    (tmp_path / "ldap-ca.pem").write_bytes((LDAP_FIXTURES / "ca.pem").read_bytes())
    ldap = ("identity:\n  ldap:\n    uri: [ldaps://ldap.example.com]\n    base: dc=example,dc=com\n"
            "    ca_cert: ldap-ca.pem\nimages:\n  registry: {node: ctl1, cache: [{upstream: nvcr.io, port: 5001}]}\n")
    cluster = load_text(SPEC.read_text() + ldap, str(tmp_path / "cluster.yaml"))
    inventory = build_inventory(cluster)
    state = State(inventory, Config(), check_for_changes=False)
    ctx = run_context.current()
    ctx.hw, ctx.in_run, ctx.slurm_version = {}, None, (22, 5)
    calls: dict[str, list] = {}

    def spy(name):
        real = getattr(operations, name)

        def wrapper(*args, **kwargs):
            meta = real(*args, **kwargs)
            calls.setdefault(host.name, []).append((name, kwargs, meta))
            return meta
        monkeypatch.setattr(operations, name, wrapper)

    for name in ("service", "restart", "restart_policy"):
        spy(name)
    for h in inventory:
        for deploy in components(cluster):
            if deploy.deploy_name != "users":
                add_deploy(state, deploy, host=h)
    return calls


def test_every_deploy_installs_the_policy_before_it_starts_its_daemon(tmp_path, monkeypatch):
    calls = _plan_calls(tmp_path, monkeypatch)
    started = set()
    for node, ops in calls.items():
        seen = []
        for op, kw, _ in ops:
            if op == "restart_policy":
                seen.append(kw["unit"])
            elif op == "service" and kw.get("running", True) and kw["unit"] not in IN_UNIT | set(EXEMPT) and not (
                    kw["unit"].startswith("corral-registry-cache-")):  # the policy in its unit text (above)
                assert kw["unit"] in seen, f"{node}: {kw['unit']} started before (or without) its restart policy"
                started.add(kw["unit"])
        assert len(seen) == len(set(seen)), f"{node}: a restart policy twice"
    # the spec has every daemon the drop-ins are for (nvidia-dcgm: GPU nodes; sssd: LDAP; grafana: monitoring)
    assert started == set(DROPIN_UNITS) - {"chrony"}  # chrony: started by base's own time_sync op
    assert all(("restart_policy", "chrony") in [(op, kw.get("unit")) for op, kw, _ in ops] for ops in calls.values())


def test_a_changed_restart_policy_never_restarts_slurmd(tmp_path, monkeypatch):
    calls = _plan_calls(tmp_path, monkeypatch)
    ops = calls["gpu01"]
    policy = next(meta for op, kw, meta in ops if op == "restart_policy" and kw["unit"] == "slurmd")
    restart = next(kw for op, kw, _ in ops if op == "restart" and kw["unit"] == "slurmd")
    assert policy not in restart["_if"].metas and len(restart["_if"].metas) == 2  # its drop-in, SPANK/GRES
