"""`corral import deepops`: a DeepOps config/ directory -> cluster.yaml (checked with the loader).

Groups map to roles, connection variables to `ssh:`, the rest to their sections (deepops_nvidia, _k8s,
_storage, _ha, _access, _slurm, _proxy). The report (deepops_report) puts every DeepOps group, host and
variable in one group, mapped, changed on purpose or not carried, with its file:line, so nothing is
dropped silently."""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from corral import limits
from corral.errors import Problem, SpecError, UsageError
from corral.importers.deepops_access import AccessImport
from corral.importers.deepops_ha import import_ha
from corral.importers.deepops_inventory import OTHER_GROUPS, ROLE_GROUPS, Inventory, Var, canon, jump_host, read_config
from corral.importers.deepops_k8s import KubernetesImport
from corral.importers.deepops_nvidia import NvidiaImport
from corral.importers.deepops_proxy import proxy_lines
from corral.importers.deepops_report import CHANGED, MAPPED, NOT_CARRIED, Report
from corral.importers.deepops_rest import report_mapped, report_rest
from corral.importers.deepops_slurm import slurm_lines
from corral.importers.deepops_storage import StorageImport
from corral.importers.deepops_vars import truthy
from corral.spec.hosts import NAME_RE, compress_names, expand_names
from corral.spec.loader import load_text
from corral.spec.models import NAME, SLURM_TIME
from corral.spec.schedulers import SCHEDULERS

INVENTORY_NAMES = ("inventory", "inventory.ini", "hosts", "hosts.ini")
ROLE_ORDER = ("controller", "accounting", "login", "compute", "monitoring", "nfs", "control-plane", "worker")
SSH_VARS = {k: k.replace("ssh_user", "user").replace("ssh_port", "port") for k in (
    "ansible_user", "ansible_ssh_user", "ansible_port", "ansible_ssh_port", "ansible_ssh_private_key_file",
    "ansible_ssh_common_args")}  # Ansible's old names map to the new ones
SSH_KEYS = frozenset(SSH_VARS)
USED_SLURM = {"slurm_cluster_name", "slurm_enable_monitoring", "slurm_monitoring_group"}


@dataclass
class ImportResult:
    yaml_text: str  # a cluster.yaml; its header comment says where it came from
    report: Report = field(default_factory=Report)

    @property
    def mapped(self) -> list[str]:  # "where: variable-or-group — text", each group in the order found
        return self.report.lines(MAPPED)

    @property
    def changed(self) -> list[str]:
        return self.report.lines(CHANGED)

    @property
    def not_carried(self) -> list[str]:
        return self.report.lines(NOT_CARRIED)

    @property
    def notes(self) -> list[str]:
        """What a reviewer must read: changed on purpose, then not carried."""
        return self.changed + self.not_carried


def import_deepops(config_dir: Path | str, scheduler: str | None = None) -> ImportResult:
    """Convert DeepOps' config/ directory; `scheduler` picks slurm or kubernetes when it has both."""
    base = Path(config_dir).expanduser()
    if not base.is_dir():
        raise UsageError("not a directory" if base.exists() else "DeepOps config directory not found",
                         where=str(base), fix="pass DeepOps' config/ directory (it holds 'inventory')")
    if scheduler not in (None, "slurm", "kubernetes"):
        raise UsageError("unknown scheduler", value=scheduler, fix="use slurm or kubernetes")
    label = next((n for n in INVENTORY_NAMES if (base / n).is_file()), None)
    if label is None:
        raise UsageError("no INI Ansible inventory in the DeepOps config directory", where=str(base),
                         fix=f"add one named {' or '.join(INVENTORY_NAMES)} (copy DeepOps' config.example/"
                         "inventory and list your hosts; YAML inventories are not supported)")
    return _Importer(read_config(base, label)).run(scheduler)


def _is_ip(text: str) -> bool:
    try:
        return bool(ipaddress.ip_address(text))
    except ValueError:
        return False


def _name(text: str) -> str | None:
    name = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")[:63]
    return name if re.match(NAME, name) else None


class _Importer:
    def __init__(self, inv: Inventory) -> None:
        self.inv, self.report, self.problems = inv, Report(), []
        self.origin: dict[str, str] = {}  # corral node name -> inventory host
        self.roles: dict[str, list[str]] = {}  # inventory host (later: node name) -> roles
        self.umbrella, self.used = "slurm-cluster", set(SSH_VARS) | {"ansible_host"}

    def problem(self, where: str, message: str, value: object, fix: str) -> None:
        self.problems.append(Problem(self.inv.full(where), message, value, fix))

    def var(self, name: str) -> Var | None:  # as the hosts of slurm-cluster / k8s-cluster see it
        return self.inv.cluster_var(name, self.umbrella)

    def add(self, hosts: list[str], role: str) -> None:
        for h in hosts:
            if role not in self.roles.setdefault(h, []):
                self.roles[h].append(role)

    def group_hosts(self, var_name: str, default: str) -> list[str]:
        var = self.var(var_name)
        hosts = self.inv.resolve(str(var.value)) if var is not None else None
        if var is not None and hosts is None:
            self.report.change(var.where, var_name, f"pattern {var.value!r} too complex; used {default!r}",
                               "nodes[].roles")
        return hosts if hosts is not None else self.inv.resolve(default) or []

    def slurm_roles(self) -> None:
        masters = self.inv.role_members("slurm-master")
        if len(masters) > 2:
            self.problem(self.inv.group_where("slurm-master"), "more than 2 hosts in [slurm-master] (Slurm "
                         "has one primary and one backup controller)", ",".join(masters), "keep 2 at most")
        self.add(masters[:1], "controller")
        self.add(masters[:1], "accounting")
        self.add(self.inv.role_members("slurm-node"), "compute")
        if any(canon(g) == "slurm-login" for g in self.inv.groups):
            self.add(self.inv.role_members("slurm-login"), "login")
        else:
            self.add(masters, "login")
            self.report.change(self.inv.group_where("slurm-master"), "[slurm-login]", "not defined; users log in on "
                               "the slurm-master (now 'login')", "nodes[].roles (login)")
        if truthy(self.var("slurm_enable_monitoring")):
            metric = self.group_hosts("slurm_monitoring_group", "slurm-metric")
            self.add(metric[:1], "monitoring")
            if len(metric) > 1:
                self.report.change(self.inv.group_where("slurm-metric"), "[slurm-metric]", f"{len(metric)} hosts; "
                                   f"corral monitors from one node: only {metric[0]} got 'monitoring'",
                                   "nodes[].roles (monitoring)")

    def run(self, forced: str | None) -> ImportResult:
        has = {s: any(self.inv.role_members(g) for g in gs) for s, gs in ROLE_GROUPS.items()}
        if not any(has.values()):
            raise SpecError([Problem(str(self.inv.path), "no host is in a DeepOps role group", None,
                                     "list hosts under [slurm-master] and [slurm-node] (Slurm) or under "
                                     "[kube_control_plane] and [kube_node] (Kubernetes)")])
        sched = forced or ("slurm" if has["slurm"] else "kubernetes")
        other = OTHER_GROUPS["kubernetes" if sched == "slurm" else "slurm"]
        self.umbrella = "slurm-cluster" if sched == "slurm" else "k8s-cluster"
        self.used |= USED_SLURM if sched == "slurm" else set()
        if all(has.values()):
            self.report.note("", f"[{', '.join(g for g in other if self.inv.role_members(g))}]", "not carried: "
                             f"a cluster.yaml has one scheduler and this one was imported as {sched}")
        if sched == "slurm":
            self.slurm_roles()
        else:
            self.add(self.inv.role_members("kube-control-plane") + self.inv.role_members("kube-master"),
                     "control-plane")
            self.add(self.inv.role_members("kube-node"), "worker")
        need = {"controller": "slurm-master", "compute": "slurm-node"} if sched == "slurm" else \
            {"control-plane": "kube_control_plane", "worker": "kube_node"}
        for role, group in need.items():
            if not any(role in r for r in self.roles.values()):
                self.problem(self.inv.group_where(canon(group)), f"no host in [{group}]", None,
                             f"list the {role} host(s) in [{group}]")
        nodes, ssh, name = self.nodes(), self.ssh(), self.cluster_name(sched)
        if len(nodes) > limits.current().max_nodes:  # only when CORRAL_MAX_IMPORT_HOSTS is the larger
            self.problem(f"{self.inv.path.name}:1", f"more than {limits.current().max_nodes} nodes to import",
                         len(nodes), f"import a smaller inventory or {limits.raise_hint('max_nodes')}")
            raise SpecError(self.problems)
        max_time = self.var("slurm_max_job_timelimit") if sched == "slurm" else None
        if max_time is not None and not re.match(SLURM_TIME, str(max_time.value)):
            self.problem(max_time.where, "slurm_max_job_timelimit is not a Slurm time", max_time.value,
                         "use e.g. INFINITE, 2-00:00:00 or 720 (minutes)")
        if self.problems:
            raise SpecError(self.problems)
        k8s = KubernetesImport(self.var, report=self.report).run() if sched == "kubernetes" else None
        nvidia = NvidiaImport(self.var, sched, report=self.report).run()
        self.used |= nvidia.used | (k8s.used if k8s else set())
        if k8s is not None and k8s.driver_version:
            self.operator_driver(k8s.driver_version, nvidia.lines)
        sections = self.sections(sched, nodes) + [("nvidia", nvidia.lines), ("kubernetes", k8s.lines if k8s else [])]
        report_rest(self.report, self.inv, self.used, other, self.umbrella, self.origin, sched)
        report_mapped(self.report, self.inv, self.used, self.origin, self.var)
        text = self.emit(name, sched, ssh, nodes, sections)
        load_text(text, f"cluster.yaml imported from {self.inv.base}")  # a SpecError here: importer bug
        return ImportResult(text, self.report)

    def sections(self, sched: str, nodes: dict[str, str]) -> list[tuple[str, list[str]]]:
        """The sections besides nodes, nvidia and kubernetes: (name, YAML lines under it); a name of ""
        for top-level lines. Storage, HA and pam_slurm_adopt are Slurm's (the slurm: section's)."""
        slurm = "slurm-conf" in SCHEDULERS[sched].carries
        names = {host: name for name, host in self.origin.items()}
        storage = StorageImport(self.inv, self.var, names, nodes, self.roles, self.report).run() if slurm else None
        state = None
        if storage is not None:
            masters = [names[h] for h in self.inv.role_members("slurm-master") if h in names]
            state = import_ha(masters, self.inv.group_where("slurm-master"), self.var, storage, self.roles,
                              self.report, self.used)
            storage.finish()
            self.used |= storage.used
        mounted = [m["path"] for m in storage.mounts] if storage else []
        access = AccessImport(self.var, self.report, slurm, mounted).run()
        self.used |= access.used
        out = [("slurm", slurm_lines(self.var, self.report, self.used, state))] if slurm else []
        out += [("storage", storage.lines() if storage else []), ("", access.lines)]
        return out + [("", proxy_lines(self.var, self.report, self.used))]

    def operator_driver(self, version: str, nvidia: list[str]) -> None:
        """The GPU Operator's driver version (gpu_operator_driver_version) is nvidia.driver.version."""
        var = self.var("gpu_operator_driver_version")
        if any(line == "  driver:" for line in nvidia):
            self.report.note(var.where, "gpu_operator_driver_version", "not carried: nvidia.driver.version comes "
                             "from nvidia_driver_package_version; set it to the Operator's if that is what runs")
        else:
            nvidia[:0] = ["  driver:", f"    version: {json.dumps(version)}  # gpu_operator_driver_version"]

    def nodes(self) -> dict[str, str]:
        """{corral node name: IP}; re-keys self.roles by node name."""
        out: dict[str, str] = {}
        by_ip: dict[str, str] = {}
        for host, hdef in self.inv.hosts.items():
            if host not in self.roles:
                known = [g for g in sum(OTHER_GROUPS.values(), ()) if self.inv.in_role(host, g)]
                groups = [g for g in self.inv.host_groups(host) if g != "ungrouped"]
                self.report.note(hdef.where, host, (
                    f"only in [{', '.join(known)}]: no role, skipped" if known else
                    f"in [{', '.join(groups)}] but in no DeepOps role group: not part of the cluster" if groups
                    else "in [all] but in no DeepOps role group: not part of the cluster"))
                continue
            name = (host if _is_ip(host) else host.split(".")[0]).lower()
            if not NAME_RE.match(name) or name in out:
                self.problem(hdef.where, f"host name {host!r} cannot be a corral node name"
                             + (" (it clashes with another host)" if name in out else ""), host,
                             "rename it in the inventory: a short lowercase hostname (letters, digits, -)")
                continue
            if name != host:
                self.report.change(hdef.where, host, f"imported as {name} (short lowercase name)", "nodes[].names")
            addr = self.inv.host_var(host, "ansible_host")
            ip = self.inv.text(addr).strip() if addr else ""
            if addr is None:
                self.problem(hdef.where, f"host {host!r} has no ansible_host", host,
                             f"write '{host} ansible_host=<its IP>' under [all]; corral needs each node's IP")
            elif not _is_ip(ip):
                self.problem(addr.where, f"host {host!r}: ansible_host is not an IP address", ip,
                             "write the node's IP address (the importer does not resolve names)")
            elif ip in by_ip:
                self.problem(addr.where, f"hosts {by_ip[ip]!r} and {host!r} have the same address", ip,
                             "give each host its own ansible_host")
            else:
                by_ip[ip], out[name], self.origin[name] = host, ip, host
                self.roles[name] = self.roles.pop(host)
        return out

    def ssh(self) -> dict[str, object]:
        found: dict[str, Counter] = {}
        first: dict[str, Var] = {}
        for host in self.origin.values():
            for key, var in self.inv.host_vars_merged(host, SSH_KEYS).items():
                found.setdefault(SSH_VARS[key], Counter())[self.inv.text(var)] += 1
                first.setdefault(SSH_VARS[key], var)
        out: dict[str, object] = {"user": "root"}
        for key, counts in found.items():
            value, where = counts.most_common(1)[0][0], first[key].where
            if len(counts) > 1:
                self.report.change(where, key, f"differs between hosts ({', '.join(counts)}); cluster.yaml has "
                                   f"one ssh setting for all nodes: {value!r} was used", "ssh")
            if "{{" in value:
                self.report.note(where, key, "a Jinja template, not imported; set ssh: by hand")
            elif key == "ansible_user" and not re.match(r"^[a-z_][a-z0-9_-]*$", value):
                self.problem(where, "ansible_user is not a valid user name", value, "use a lowercase login")
            elif key == "ansible_user":
                out["user"] = value
            elif key == "ansible_port" and not (value.isdigit() and 0 < int(value) < 65536):
                self.problem(where, "ansible_port is not a port number", value, "use 1 to 65535")
            elif key == "ansible_port":
                out["port"] = int(value)
            elif key == "ansible_ssh_private_key_file":  # relative to the deepops/ checkout
                relative = not (value.startswith("~") or Path(value).is_absolute())
                out["key"] = str((self.inv.base.parent / value).resolve()) if relative else value
            elif jump_host(value):
                out["jump_host"] = jump_host(value)
                if re.search(r"-o\s*(?!Proxy)\w+=", value):
                    self.report.change(where, "ansible_ssh_common_args", "only the jump host was carried",
                                       "ssh.jump_host")
            else:
                self.report.note(where, "ansible_ssh_common_args", "only a jump host (-J, ProxyJump, ProxyCommand "
                                 f"ssh -W) is carried; got {value!r}")
        if "ansible_user" not in found:
            self.report.change("", "ansible_user", "not set (Ansible used your local login); ssh.user is root",
                               "ssh.user")
        return out

    def cluster_name(self, sched: str) -> str:
        var = self.var("slurm_cluster_name") if sched == "slurm" else None
        name = _name(str(var.value)) if var is not None and "{{" not in str(var.value) else None
        if name and var is not None:
            if name != var.value:
                self.report.change(var.where, "slurm_cluster_name", f"{var.value!r} imported as {name!r}", "name")
            return name
        base = self.inv.base.resolve()
        name = _name(base.parent.name if base.name == "config" else base.name) or "cluster"
        if sched == "slurm":
            self.report.change(var.where if var else "", "slurm_cluster_name", "unset or unusable (DeepOps' default "
                               f"ClusterName is 'deepops'); cluster.yaml name is {name!r}", "name")
        return name

    def emit(self, name: str, sched: str, ssh: dict[str, object], nodes: dict[str, str],
             sections: list[tuple[str, list[str]]]) -> str:
        groups: dict[tuple[str, ...], list[str]] = {}
        for node in nodes:
            groups.setdefault(tuple(r for r in ROLE_ORDER if r in self.roles[node]), []).append(node)
        body = [f"name: {json.dumps(name)}", f"scheduler: {sched}", "ssh:"]
        body += [f"  {k}: {json.dumps(v)}" for k, v in ssh.items()] + ["nodes:"]
        gpu_groups = []
        for key, names in groups.items():
            expr = compress_names(names)
            if sorted(expand_names(expr)) != sorted(names):  # correct over pretty
                expr = ",".join(names)
            body += [f"  - names: {json.dumps(expr)}",  # addresses in the order the names expand
                     f"    addresses: [{', '.join(json.dumps(nodes[n]) for n in expand_names(expr))}]",
                     f"    roles: [{', '.join(key)}]"]
            if {"compute", "worker"} & set(key):
                gpu_groups.append(expr)
                body.append("    # TODO gpus: {model: <GRES type, e.g. h100>, count: <per node>}")
        if gpu_groups:
            self.report.note("", f"gpus ({'; '.join(gpu_groups)})", "declare gpus: per group (DeepOps detects "
                             "them at run time; corral `doctor` will compare)")
        for section, lines in sections:
            body += ([f"{section}:"] if section and lines else []) + lines
        mapped = len(self.report.lines(MAPPED))
        head = [f"# Imported by `corral import deepops` from {self.inv.base.resolve()}",
                f"# ({self.inv.path.name}, group_vars/, host_vars/). Review it, then declare GPUs.",
                f"# {mapped} DeepOps settings carried as they were (`corral import deepops --json` lists them)."]
        for group, title in ((CHANGED, "Changed on purpose:"), (NOT_CARRIED, "Not carried over from DeepOps:")):
            lines = self.report.lines(group)
            head += [f"# {title}"] + ["#   - " + n.replace("\n", " ") for n in lines] if lines else []
        return "\n".join(head + body) + "\n"
