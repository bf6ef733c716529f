"""Hostile-strings fuzz, part 2: every file and command corral renders from a spec, and the checks that
a value stays one word / one value there (tests/unit/test_spec_hostile_strings.py)."""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Any

from ruamel.yaml import YAML

from corral.render import dcgm as dcgm_deploy
from corral.render import dcgm_exporter as dcgm_exporter_deploy
from corral.render import health as health_deploy
from corral.deploy import jobhooks as jobhooks_deploy
from corral.deploy import nvidia_tools
from corral.render.monitoring import node_exporter_args
from corral.deploy.nodestate import NodeState
from corral.deploy.nvidia_repo import KEYRING_DEB, keyring_script
from corral.deploy.sacct_sync import AcctState, plan_sync
from corral.deploy.slurm import dropin
from corral.deploy.slurm_ha import make_state_script
from corral.engine.inventory import ssh_config_text
from corral.errors import SpecError
from corral.render import render_cgroup_conf, render_gres_conf, render_slurm_conf, render_slurmdbd_conf
from corral.render.power import power_config
from corral.render.adopt import access_conf
from corral.render.alertmanager import render_alertmanager_yml
from corral.render.alerts import render_rules
from corral.render.acceptance import gpu_burn_build_script, nccl_tests_build_script
from corral.render.containers import enroot_conf, plugstack_conf, pyxis_build_script
from corral.render.debs import release_debs_script
from corral.render.grafana import render_datasource, render_ini
from corral.render.hosts import BEGIN, END, render_hosts_block
from corral.render.mig import mig_parted_config
from corral.render.job_env import job_env_text
from corral.render.topology import topology_conf
from corral.render.nvidia import driver_package, pin_text
from corral.render.prometheus import listen_address, render_prometheus_yml
from corral.render.storage import render_exports, render_mount_unit, requires_mounts_dropin, state_dropin
from corral.spec.shared import state_mount, state_save_location
from corral.deploy.users_plan import plan_accounts
from corral.facts.accounts import Accounts
from corral.render.sssd import render_sssd_conf
from corral.spec.cluster import Cluster
from corral.spec.containers import PLACEHOLDERS
from corral.spec.loader import load_text

from tests.unit.hostile_spec import (  # noqa: F401
    LOCATED, Leaf, PATH, to_yaml, with_value,
)



# --- everything rendered from a cluster ------------------------------------------------------------

CUDA_PATH = "ubuntu2204/x86_64"


def render_kubernetes(cluster: Cluster) -> dict[str, tuple[str, str]]:
    """A Kubernetes cluster's files (render/kubernetes.py, render/gpu_operator.py): every node's, and the
    cluster objects; YAML, or plain lines."""
    from corral.render.gpu_operator import cluster_files
    from corral.render.kubernetes import node_files
    out: dict[str, tuple[str, str]] = {}
    for n in cluster.nodes:
        for path, text in node_files(cluster, n).items():
            out[f"{n.name}:{path}"] = ("yaml" if path.endswith(".yaml") else "words", text)
    for name, text in cluster_files(cluster).items():
        out[f"cluster:{name}"] = ("json" if name.endswith(".json") else "yaml", text)
    return out


def render_all(cluster: Cluster) -> dict[str, tuple[str, str]]:
    """name -> (format, text) of every config file and script corral renders from the spec."""
    if cluster.spec.scheduler == "kubernetes":
        return render_kubernetes(cluster)
    nv, mon = cluster.spec.nvidia, cluster.spec.monitoring
    out: dict[str, tuple[str, str]] = {
        "slurm.conf": ("slurm", render_slurm_conf(cluster, {}, **(
            {"version": (23, 11)} if cluster.spec.topology and cluster.spec.topology.blocks else {}))),
        "gres.conf": ("slurm", render_gres_conf(cluster)),
        "cgroup.conf": ("slurm", render_cgroup_conf(cluster)),
        "plugstack.conf": ("slurm", plugstack_conf(nv.pyxis)),
        "prometheus.yml": ("yaml", render_prometheus_yml(cluster)),
        "alertmanager.yml": ("yaml", render_alertmanager_yml(cluster)),
        "corral.rules.yml": ("yaml", render_rules(cluster)),
        "jobhooks.json": ("json", jobhooks_deploy.config(cluster)),
        "ssh_config": ("words", ssh_config_text(cluster, list(cluster.nodes))),
        "pam_slurm_adopt access file": ("words", access_conf(cluster.spec.ssh.user)),
        "sacctmgr commands": ("shell", "\n".join(plan_sync(cluster, AcctState()).commands) + "\n"),
        "dcgm pin": ("words", dcgm_deploy.pin(nv.dcgm.package, nv.dcgm.version)),
        "dcgm-exporter pin": ("words", dcgm_exporter_deploy.pin(mon.dcgm_exporter.package, mon.dcgm_exporter.version)),
        "dcgm-exporter keyring script": ("shell", keyring_script(
            f"{mon.dcgm_exporter.repo_url.rstrip('/')}/{CUDA_PATH}/{KEYRING_DEB}")),
    }
    if cluster.spec.topology is not None:
        out["topology.conf"] = ("slurm", topology_conf(cluster))
    if cluster.spec.slurm.clean_jobs:
        from corral.render.job_container import job_container_conf
        out["job_container.conf"] = ("slurm", job_container_conf(cluster, (22, 5)))
    if cluster.spec.software is not None:
        from corral.render.lmod import modulespath
        out["lmod modulespath"] = ("paths", modulespath(cluster))
        if cluster.spec.software.easybuild is not None:
            from corral import workbench_wheels as ww
            from corral.deploy.venvs import build_script
            from corral.render.easybuild import config
            from corral.spec import easybuild as eb
            from corral.workflows.software_build import Build
            out["easybuild config"] = ("words", config(cluster))
            out["easybuild venv build"] = ("shell", build_script(ww.EASYBUILD, "0" * 16,
                                                                 eb.venv_builder(cluster, "0" * 16)[1], "3.11"))
            b = Build("x-1.eb", eb.prefix(cluster), eb.venv(cluster, "0" * 16), cluster.spec.software.easybuild.user,
                      eb.build_node(cluster).name, token="00000000")
            out["easybuild stage"] = ("shell", b.stage_script())
            out["easybuild job"] = ("shell", b.job_script())
            out["easybuild submit"] = ("shell", b.submit_script(3600))
    if cluster.with_role("accounting"):
        out["slurmdbd.conf"] = ("slurm", render_slurmdbd_conf(cluster, db_password="db-password"))
    for server in cluster.with_role("monitoring")[:1]:
        out["grafana datasource"] = ("yaml", render_datasource(cluster))
        out["grafana.ini"] = ("words", render_ini(cluster, server.address, "admin-password"))
        out["dcgm-exporter unit"] = ("systemd", dcgm_exporter_deploy.unit(
            mon.dcgm_exporter.binary, listen_address(cluster, server.address, mon.dcgm_exporter.port),
            mon.gpu_job_map_dir))
    for i, n in enumerate(cluster.nodes):  # by index: a node's name is a value under test
        out[f"hosts block #{i}"] = ("hosts", render_hosts_block(cluster, n))
        out[f"node-exporter args #{i}"] = ("words", node_exporter_args(cluster, n))
        if "compute" in n.roles:
            out[f"health.json #{i}"] = ("json", health_deploy.config(cluster, n))
            out[f"slurmd drop-in #{i}"] = ("systemd", dropin(cluster, n))
            out[f"job-env #{i}"] = ("env", job_env_text(cluster, n, None))
        if n.gpus is not None and n.gpus.mig is not None:
            out[f"mig-parted.json #{i}"] = ("json", mig_parted_config(n.gpus))
        if n.gpus is not None and "compute" in n.roles and nv.driver is not None:
            package = nv.driver.package or driver_package(nv.driver, n, "ubuntu", "22.04")
            out[f"driver pin #{i}"] = ("words", pin_text(package, nv.driver.version, nv.driver.package is not None))
    if cluster.spec.power.enabled:
        out["power.json"] = ("json", power_config(cluster))
    if cluster.spec.proxy is not None:
        from corral.render import proxy as proxy_render
        out["/etc/environment proxy block"] = ("words", proxy_render.environment_block(cluster))
        out["apt proxy"] = ("words", proxy_render.apt_conf(cluster) or "")
        out["engine proxy drop-in"] = ("systemd", proxy_render.engine_dropin(cluster) or "")
    if cluster.spec.users or cluster.spec.groups:
        plan = plan_accounts(cluster.spec.users, cluster.spec.groups, cluster.spec.identity.homes, "node01", Accounts())
        out["account commands"] = ("shell", "\n".join(c.get_raw_value() for c in plan.commands) + "\n")
    if cluster.spec.images.registry is not None:
        from corral.render import registry as registry_render
        from corral.render.podman import registries_conf
        for i, inst in enumerate(registry_render.instances(cluster)):
            out[f"registry config #{i}"] = ("yaml", registry_render.config(cluster, inst, ("user", "password")))
            out[f"registry unit #{i}"] = ("systemd", registry_render.cache_unit(inst) if inst.upstream
                                          else registry_render.site_hardening(inst))
        out["podman registries.conf"] = ("words", registries_conf(cluster))
    if cluster.spec.storage.exports:
        out["exports"] = ("exports", render_exports(cluster))
    for i, m in enumerate(cluster.spec.storage.mounts):
        out[f"mount unit #{i}"] = ("systemd", render_mount_unit(cluster, m))
    for i, n in enumerate(cluster.nodes):
        dropin_text = requires_mounts_dropin(cluster, n)
        if dropin_text:
            out[f"slurmd mounts drop-in #{i}"] = ("systemd", dropin_text)
    state = state_dropin(cluster)
    if state is not None:
        out["slurmctld state drop-in"] = ("systemd", state)
        out["shared state script"] = ("shell", make_state_script(state_save_location(cluster),
                                                                 state_mount(cluster).path) + "\n")
    if cluster.spec.identity.ldap is not None:
        ldap = cluster.spec.identity.ldap
        for i, n in enumerate(cluster.nodes):  # the access provider is per node
            out["sssd.conf" + (f" #{i}" if i else "")] = ("sssd", render_sssd_conf(cluster, "bind-password" if ldap.bind_dn else None, n))
    if nv.driver is not None:
        out["driver keyring script"] = ("shell", keyring_script(
            f"{nv.driver.repo_url.rstrip('/')}/{CUDA_PATH}/{KEYRING_DEB}"))
    if nv.container_toolkit is not None:
        out["container toolkit source"] = ("words", nvidia_tools.ctk_source(nv.container_toolkit.repo_url))
        out["container toolkit pin"] = ("words", nvidia_tools.ctk_pin(nv.container_toolkit.version))
    if nv.enroot is not None:
        e = nv.enroot
        out["enroot.conf"] = ("enroot", enroot_conf(e))
        out["enroot install script"] = ("shell", release_debs_script(
            "enroot", "nvidia.enroot.sha256", e.packages, e.version, e.url, e.sha256))
    if nv.pyxis is not None:
        out["pyxis build script"] = ("shell", pyxis_build_script(nv.pyxis))
    acc = cluster.spec.acceptance
    if nv.cuda_toolkit is not None and acc.burn.enabled:
        out["gpu-burn build script"] = ("shell", gpu_burn_build_script(acc.burn, nv.cuda_toolkit.version, "h100"))
    if nv.cuda_toolkit is not None and acc.nccl.enabled:
        out["nccl-tests build script"] = ("shell", nccl_tests_build_script(acc.nccl, nv.cuda_toolkit.version, "h100"))
    m = nv.mig_parted
    out["mig-parted install script"] = ("shell", release_debs_script(
        "mig-parted", "nvidia.mig_parted.sha256", m.packages, m.version, m.url, m.sha256))
    packages = [*(nv.enroot.packages if nv.enroot else []), *m.packages, nv.dcgm.package, mon.dcgm_exporter.package]
    packages += [nvidia_tools.cuda_package(nv.cuda_toolkit.version)] if nv.cuda_toolkit else []
    packages += [nv.driver.package] if nv.driver and nv.driver.package else []
    out["node snapshot command"] = ("shell", NodeState().command(packages=tuple(packages)))
    return out


@lru_cache(maxsize=None)
def _benign(text: str) -> dict[str, tuple[str, str]]:
    return render_all(load_text(text, PATH))


def benign_outputs(leaf: Leaf) -> dict[str, tuple[str, str]]:
    return _benign(to_yaml(leaf.base))


# --- what "safe" means, per format ------------------------------------------------------------------

SHELL_ACTIVE = set(" \t\n;&|<>()$`*?[]{}#~!")


def shell_active(script: str, chars: set[str] = SHELL_ACTIVE) -> Counter:
    """The shell syntax characters of `script` outside quotes (and $ ` \\ inside double quotes)."""
    out: Counter = Counter()
    state, i = "", 0
    while i < len(script):
        c = script[i]
        if state == "'":
            state = "" if c == "'" else state
        elif state == '"':
            if c == "\\":
                out["\\"] += 1
                i += 1
            elif c == '"':
                state = ""
            elif c in "$`":
                out[c] += 1
        elif c == "\\":
            out["\\"] += 1
            i += 1
        elif c in "'\"":
            state = c
        elif c in chars:
            out[c] += 1
        i += 1
    if state:
        out["unterminated " + state] += 1
    return out


def _line_shapes(text: str, comment: str = "#") -> set[tuple]:
    """(first key, number of words) of each line: a line of a new kind or with an extra word shows."""
    shapes = set()
    for line in text.split("\n"):
        body = line.split(comment, 1)[0] if comment else line
        words = body.split()
        if words:
            shapes.add((re.split(r"[=:]", words[0], maxsplit=1)[0], len(words)))
    return shapes


def check_slurm(text: str, benign: str, value: str) -> None:
    """Slurm's parser: '#' starts a comment, words are `Key=value`: no line may have keys (or a word
    count) that no line of the benign rendering has."""
    def shapes(t: str) -> set[tuple]:  # (first key, Key=value words, words); a key may be a value (pyxis args)
        out = set()
        for line in t.split("\n"):
            words = line.split("#", 1)[0].split()
            if words:
                out.add((words[0].split("=", 1)[0] if "=" in words[0] else words[0],
                         sum("=" in w for w in words), len(words)))
        return out
    new = shapes(text) - shapes(benign)
    assert not new, f"lines of a new shape: {sorted(new)}"


def _structure(obj: Any, prefix: tuple = ()) -> set[tuple]:
    if isinstance(obj, dict):
        out = {prefix}
        for k, v in obj.items():
            out |= _structure(v, prefix + (str(k),))
        return out
    if isinstance(obj, list):
        out = {prefix}
        for v in obj:
            out |= _structure(v, prefix + ("[]",))
        return out
    return {prefix + (type(obj).__name__,)}


_SAFE_YAML = YAML(typ="safe", pure=True)


@lru_cache(maxsize=64)
def _yaml_structure(text: str) -> frozenset:
    """Every document's structure (kubeadm's configuration is three documents), tagged with its index."""
    return frozenset((i, part) for i, doc in enumerate(_SAFE_YAML.load_all(text)) for part in _structure(doc))


def check_yaml(text: str, benign: str, value: str) -> None:
    new = _yaml_structure(text) - _yaml_structure(benign)
    assert not new, f"YAML structure the benign rendering does not have: {sorted(new)[:5]}"


def check_json(text: str, benign: str, value: str) -> None:
    data, base = json.loads(text), json.loads(benign)
    assert set(data) == set(base), "JSON top-level keys changed"


def check_words(text: str, benign: str, value: str) -> None:
    """Whitespace-split config lines (apt, ssh_config, ini, defaults files): same kinds of lines,
    each with the same number of words."""
    new = _line_shapes(text) - _line_shapes(benign)
    assert not new, f"lines of a new shape: {sorted(new)}"


def check_paths(text: str, benign: str, value: str) -> None:
    """A list of directories, one a line (Lmod's modulespath): each line one absolute path, nothing but
    path characters, never more lines than the benign rendering."""
    lines = [ln for ln in text.split("\n") if ln and not ln.startswith("#")]
    odd = [ln for ln in lines if not re.fullmatch(r"/[A-Za-z0-9._+@:,=/-]*", ln)]
    assert not odd, f"not one absolute path a line: {odd[:3]}"
    assert len(lines) <= len([ln for ln in benign.split("\n") if ln and not ln.startswith("#")]), "more lines"


_ENV_LINE = re.compile(r"[A-Z][A-Z0-9_]{0,63}=[A-Za-z0-9._/:=,+%@-]*")


def check_env(text: str, benign: str, value: str) -> None:
    """KEY=value lines a shell reads (the job-env file the TaskProlog exports): the keys are the spec's to
    name, but every line stays one NAME=word, never more lines than the benign rendering (an empty value
    drops a variable: one fewer)."""
    lines = [ln for ln in text.split("\n") if ln and not ln.startswith("#")]
    odd = [ln for ln in lines if not _ENV_LINE.fullmatch(ln)]
    assert not odd, f"not NAME=word: {odd[:3]}"
    assert len(lines) <= len([ln for ln in benign.split("\n") if ln and not ln.startswith("#")]), "a line more"


def check_exports(text: str, benign: str, value: str) -> None:
    """exports(5): each entry (continuations joined) is a path and CLIENT(options) words, as many as
    in the benign rendering; no value adds a client, an option list or an entry."""
    def entries(t: str) -> list[list[str]]:
        joined = t.replace("\\\n", " ")
        return [line.split() for line in joined.split("\n") if line.strip() and not line.startswith("#")]
    got, want = entries(text), entries(benign)
    assert [len(e) for e in got] == [len(e) for e in want], "entries or clients added"
    for e in got:
        assert e[0].startswith("/") and "(" not in e[0], e[0]
        for client in e[1:]:
            assert re.fullmatch(r"[^()\s]+\([^()\s]*\)", client), client


_UNIT_ESCAPE = re.compile(r"\\x[0-9a-f]{2}")  # systemd-escape's own \xNN in a unit name ("/a-b" -> a\x2db.mount)


def check_systemd(text: str, benign: str, value: str) -> None:
    check_words(text, benign, value)
    text, benign = _UNIT_ESCAPE.sub("", text), _UNIT_ESCAPE.sub("", benign)
    for c in "%$;\\":  # specifiers, environment expansion, command separators, escapes (not unit-name ones)
        assert text.count(c) == benign.count(c), f"systemd unit gains {c!r}"


def check_hosts(text: str, benign: str, value: str) -> None:
    lines = text.split("\n")
    assert lines[0] == BEGIN and lines[-2] == END and lines[-1] == ""
    assert len(lines) == len(benign.split("\n"))
    for line in lines[1:-2]:
        address, name = line.split("\t")
        ipaddress.ip_address(address)
        assert len(line.split()) == 2, line


ENROOT_KEY = re.compile(r"ENROOT_[A-Z0-9_]+")


def check_enroot(text: str, benign: str, value: str) -> None:
    """enroot reads each line as `key value` and runs `eval echo value` in the user's shell: besides
    the $(id -u) / $(id -g) placeholders, no value may carry shell syntax the benign rendering lacks."""
    def parse(t: str) -> tuple[list[str], Counter]:
        keys, active = [], Counter()
        for line in t.split("\n"):
            if line and not line.startswith("#"):
                key, rest = re.fullmatch(r"([^ \t=]*)[ \t=]*(.*)", line).groups()  # read -r key value
                keys.append(key)
                for placeholder in PLACEHOLDERS:
                    rest = rest.replace(placeholder, "")
                active += shell_active(rest, SHELL_ACTIVE - {" ", "\t"})
        return keys, active
    keys, active = parse(text)
    bkeys, bactive = parse(benign)
    assert len(keys) == len(bkeys) and all(ENROOT_KEY.fullmatch(k) for k in keys), keys
    assert active == bactive, f"enroot.conf values gain shell syntax: {active - bactive}"


def _sssd_lines(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """sssd.conf as ding-libs reads it: ([section] or key per line, in order), the values."""
    keys, values = [], []
    for line in text.split("\n"):
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            assert line.endswith("]") and line.count("[") == line.count("]") == 1, f"not a section line: {line!r}"
            keys.append(("section", line))
            continue
        key, eq, value = line.partition(" = ")
        assert eq and re.fullmatch(r"[a-z_]+", key), f"not a 'key = value' line: {line!r}"
        keys.append(("key", key))
        values.append(value)
    return keys, values


def check_sssd(text: str, benign: str, value: str) -> None:
    """sssd.conf (INI, ding-libs): a comment only at the start of a line, no quoting or escapes, a value
    is the rest of its line less the blanks at its ends. The same sections and keys in the same order as
    the benign rendering, no value with blanks at its ends, and no new '%' (SSSD expands %u, %h... in
    some options), quote or backslash."""
    keys, values = _sssd_lines(text)
    bkeys, _ = _sssd_lines(benign)
    assert keys == bkeys, f"sections or keys differ: {sorted(set(keys) ^ set(bkeys))[:5]}"
    assert all(v == v.strip() and v for v in values), "a value with blanks at its ends, or empty"
    for c in "%\"'\\":
        assert text.count(c) == benign.count(c), f"sssd.conf gains {c!r}"


def check_shell(text: str, benign: str, value: str) -> None:
    """The script's unquoted shell syntax is the benign script's: the value stayed inside quotes."""
    strip = '"$arch"'  # url_script's own construct: one per {arch} in a URL template
    active, bactive = shell_active(text.replace(strip, "")), shell_active(benign.replace(strip, ""))
    assert active == bactive, f"unquoted shell syntax differs: +{active - bactive} -{bactive - active}"
    tokens = shlex.split(text, comments=False)
    if len(value) > 1 and text.count(value) > benign.count(value):
        assert any(value in t for t in tokens), "the value is split over several words"
    options = {t for t in tokens if t.startswith("-")} - {t for t in shlex.split(benign) if t.startswith("-")}
    assert not options, f"new option-like words: {sorted(options)[:5]}"


CHECKS = {"env": check_env, "exports": check_exports, "paths": check_paths, "slurm": check_slurm, "yaml": check_yaml, "json": check_json, "words": check_words,
          "systemd": check_systemd, "hosts": check_hosts, "enroot": check_enroot, "shell": check_shell,
          "sssd": check_sssd}

LINE_BREAKS = set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # str.splitlines() splits at each
# Parsed, not copied: spec/hosts.py strips the blanks around an address and writes it back as ipaddress
# formats it (" 10.0.0.1\n" is accepted; the rendered files have 10.0.0.1)
NORMALIZED = {"nodes[].addresses", "nodes[].addresses[]",  # parsed as IP addresses, never copied
              "power.bmc.nodes[].addresses"}


def _bad_chars(text: str, newline: bool = True) -> Counter:
    """Line breaks (as str.splitlines() sees them) and control characters in `text`."""
    return Counter(c for c in text
                   if (c in LINE_BREAKS or unicodedata.category(c) == "Cc") and (newline or c != "\n"))


def outcome(leaf: Leaf, value: str) -> None:
    """Load the base spec with `value` at `leaf`; assert a located error or a harmless value."""
    text = to_yaml(with_value(leaf, value))
    try:
        cluster = load_text(text, PATH)
    except SpecError as err:
        assert err.problems, "a SpecError without problems"
        for p in err.problems:
            m = LOCATED.match(p.where)
            assert m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1, f"not located: {p.where!r} ({p.message})"
            assert "\n" not in str(p), str(p)
        return
    bad = sorted(_bad_chars(value))
    assert leaf.id in NORMALIZED or not bad, f"{leaf.id}: accepted a value with line breaks or controls {bad!r}"
    benign = benign_outputs(leaf)
    outputs = render_all(cluster)
    assert set(outputs) == set(benign), f"rendered files differ: {set(outputs) ^ set(benign)}"
    for name, (kind, rendered) in outputs.items():
        if rendered == benign[name][1]:
            continue
        try:  # a line more or less is the shape checks' business (a GPU model of its own: a gres.conf line)
            assert _bad_chars(rendered, False) == _bad_chars(benign[name][1], False), "line breaks or controls"
            CHECKS[kind](rendered, benign[name][1], value)
        except AssertionError as exc:
            raise AssertionError(f"{leaf.id} = {value!r} reaches {name} unsafely: {exc}") from None


