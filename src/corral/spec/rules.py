"""Cross-field checks of an expanded cluster (pure, offline, before any SSH)."""

from __future__ import annotations

import difflib
import ipaddress
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.rules_acceptance import acceptance_warnings, check_acceptance
from corral.spec.rules_download import check_checksums, check_urls, download_warnings
from corral.spec.rules_driver import check_driver
from corral.spec.rules_gpus import check_gpu_models, gpu_model_warnings
from corral.spec.rules_ha import check_ha, ha_warnings
from corral.spec.rules_kubernetes import check_kubernetes, kubernetes_warnings
from corral.spec.rules_storage import check_storage, storage_warnings
from corral.spec.rules_support import check_support, support_warnings
from corral.spec.rules_ldap import check_ldap, ldap_warnings
from corral.spec.rules_os import check_os, check_slurm_release, release_warnings, slurm_release_warnings
from corral.spec.rules_reports import check_reports
from corral.spec.rules_rollout import check_rollout, rollout_warnings
from corral.spec.rules_bundle import bundle_warnings, check_bundle
from corral.spec.rules_topology import check_topology, target_slurm, topology_warnings
from corral.spec.rules_power import check_power, power_warnings
from corral.spec.rules_images import check_images
from corral.spec.rules_easybuild import check_easybuild
from corral.spec.rules_software import check_clean_jobs, check_software
from corral.spec.rules_workbench import check_workbench
from corral.spec.rules_users import check_users, users_warnings
from corral.spec.hosts import RangeError, expand_names
from corral.spec import schedulers
from corral.spec.slurm_keys import (GLOBAL_KEYS, PARTITION_KEYS, PROGRAM_KEYS, RENDERED_KEYS,
                                    RENDERED_PARTITION_KEYS, RESERVED_KEYS, RESERVED_PARTITION_KEYS, every_release,
                                    release_keys, releases_knowing)

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def _hint(value: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(value, choices, n=1)
    return f"did you mean {close[0]!r}?" if close else f"choose from: {', '.join(choices) or '(none)'}"


def check_nodes(cluster: Cluster, where: Where) -> list[Problem]:
    problems = []
    for attr, label in (("name", "node name"), ("address", "address")):
        groups: dict[str, set[int]] = {}
        counts: Counter[str] = Counter()
        for n in cluster.nodes:
            value = getattr(n, attr)
            counts[value] += 1
            groups.setdefault(value, set()).add(n.group)
        for value, count in counts.items():
            if count > 1:
                key = "names" if attr == "name" else "addresses"
                problems.append(Problem(where(("nodes", max(groups[value]), key)),
                                        f"duplicate {label}: used {count} times", value,
                                        f"give every node a unique {label}"))
    return problems


def check_roles(cluster: Cluster, where: Where) -> list[Problem]:
    spec, problems = cluster.spec, []
    allowed = schedulers.of(cluster).roles
    for gi, group in enumerate(spec.nodes):
        roles = list(group.roles)
        for r in roles:
            if r not in allowed:
                problems.append(Problem(where(("nodes", gi, "roles")),
                                        f"role {r!r} does not exist for scheduler {spec.scheduler!r}", r,
                                        f"use roles from: {', '.join(allowed)}"))
        dup = [r for r, c in Counter(roles).items() if c > 1]
        if dup:
            problems.append(Problem(where(("nodes", gi, "roles")), "role listed twice", dup[0],
                                    "list each role once"))
        if "controller" in roles and len(expand_or_empty(group.names)) > 2:
            problems.append(Problem(where(("nodes", gi, "roles")),
                                    "more than 2 controllers (Slurm supports one primary and one backup)",
                                    group.names, "give the controller role to at most 2 nodes"))
        group_flagged = bool("gpus" in group.model_fields_set and group.gpus and group.gpus.count > 0
                             and not ({"compute", "worker", "login"} & set(roles)))
        if group_flagged:
            problems.append(Problem(where(("nodes", gi, "gpus")),
                                    "GPUs declared on nodes that run no jobs", roles,
                                    "add the 'compute' role (or 'worker' on Kubernetes) or drop 'gpus'"))
        for oname, o in group.overrides.items():
            oloc = ("nodes", gi, "overrides", oname)
            for r in dict.fromkeys(o.roles or []):
                if r not in allowed:
                    problems.append(Problem(where(oloc + ("roles",)),
                                            f"role {r!r} does not exist for scheduler {spec.scheduler!r}", r,
                                            f"use roles from: {', '.join(allowed)}"))
            odup = [r for r, c in Counter(o.roles or []).items() if c > 1]
            if odup:
                problems.append(Problem(where(oloc + ("roles",)), "role listed twice", odup[0],
                                        "list each role once"))
            node_roles = set(o.roles or roles)
            count = o.gpus.count if o.gpus and o.gpus.count is not None else (
                group.gpus.count if group.gpus else 0)
            if count > 0 and not ({"compute", "worker", "login"} & node_roles) and (
                    o.roles or (o.gpus and not group_flagged)):
                problems.append(Problem(where(oloc), f"node {oname!r}: GPUs declared on a node that runs no jobs",
                                        sorted(node_roles),
                                        "add the 'compute' role (or 'worker' on Kubernetes) or drop 'gpus'"))
    if problems:
        return problems
    need = {"slurm": ["controller", "compute"], "kubernetes": ["control-plane", "worker"]}[spec.scheduler]
    for role in need:
        if not cluster.with_role(role):
            problems.append(Problem(where(("nodes",)), f"no node has the {role!r} role", None,
                                    f"add '{role}' to the roles of a node group"))
    for role, most in (("controller", 2), ("accounting", 1), ("monitoring", 1)):
        holders = cluster.with_role(role)
        if len(holders) > most:
            problems.append(Problem(where(("nodes",)), f"{len(holders)} nodes have the {role!r} role "
                                    f"(at most {most})", ",".join(n.name for n in holders),
                                    f"give '{role}' to at most {most} node(s)"))
    return problems


def expand_or_empty(expr: str) -> list[str]:
    try:
        return expand_names(expr)
    except RangeError:
        return []


def check_slurm(cluster: Cluster, where: Where) -> list[Problem]:
    slurm, problems = cluster.spec.slurm, []
    compute = [n.name for n in cluster.with_role("compute")]
    compute_set, all_names = set(compute), {n.name for n in cluster.nodes}
    qos_names = [q.name for q in slurm.qos]
    for kind, items in (("partition", slurm.partitions), ("qos", slurm.qos), ("account", slurm.accounts)):
        for name, count in Counter(i.name for i in items).items():
            if count > 1:
                problems.append(Problem(where(("slurm",)), f"duplicate {kind} name", name,
                                        f"give every {kind} a unique name"))
    if sum(p.default for p in slurm.partitions) > 1:
        problems.append(Problem(where(("slurm", "partitions")), "more than one default partition", None,
                                "set 'default: true' on one partition only"))
    for pi, part in enumerate(slurm.partitions):
        loc = ("slurm", "partitions", pi)
        if part.nodes != "ALL":
            try:
                names = expand_names(part.nodes)
            except RangeError as exc:
                problems.append(Problem(where(loc + ("nodes",)), str(exc), None, "use a hostlist or ALL"))
                continue
            for name in names:
                if name not in compute_set:
                    what = "is not a compute node" if name in all_names else "does not exist in the spec"
                    problems.append(Problem(where(loc + ("nodes",)), f"partition {part.name!r}: node {name!r} "
                                            f"{what}", name, _hint(name, compute)))
        if part.qos and part.qos not in qos_names:
            problems.append(Problem(where(loc + ("qos",)), f"partition {part.name!r}: unknown QOS", part.qos,
                                    _hint(part.qos, qos_names)))
    for qi, qos in enumerate(slurm.qos):
        for other in qos.preempt:
            if other == qos.name:
                problems.append(Problem(where(("slurm", "qos", qi, "preempt")),
                                        f"QOS {qos.name!r} cannot preempt itself", other,
                                        f"remove {other!r} from its 'preempt' list"))
            elif other not in qos_names:
                problems.append(Problem(where(("slurm", "qos", qi, "preempt")),
                                        f"QOS {qos.name!r} preempts an unknown QOS", other,
                                        _hint(other, [q for q in qos_names if q != qos.name])))
    acct_names = [a.name for a in slurm.accounts]
    for ai, acct in enumerate(slurm.accounts):
        loc = ("slurm", "accounts", ai)
        if acct.parent and acct.parent not in acct_names:
            problems.append(Problem(where(loc + ("parent",)), f"account {acct.name!r}: unknown parent",
                                    acct.parent, _hint(acct.parent, acct_names)))
        for q in acct.qos + ([acct.default_qos] if acct.default_qos else []):
            if q not in qos_names and q != "normal":
                problems.append(Problem(where(loc + ("qos",)), f"account {acct.name!r}: unknown QOS", q,
                                        _hint(q, qos_names)))
        if acct.default_qos and acct.qos and acct.default_qos not in acct.qos:
            problems.append(Problem(where(loc + ("default_qos",)), "default_qos is not in the account's qos list",
                                    acct.default_qos, "add it to 'qos'"))
    return problems + check_slurm_extra(cluster, where)


def check_slurm_extra(cluster: Cluster, where: Where) -> list[Problem]:
    """slurm.extra and slurm.partitions[].extra: slurm.conf keys (spelt as slurm.conf(5) does) that corral
    neither renders nor relies on, and that name no program Slurm would run."""
    slurm, problems = cluster.spec.slurm, []
    target = target_slurm(cluster)
    major = f"{target[0]:02d}.{target[1]:02d}" if target else None
    sections = [(("slurm", "extra"), slurm.extra, "global", RENDERED_KEYS, RESERVED_KEYS, "slurm.conf")]
    sections += [(("slurm", "partitions", pi, "extra"), p.extra, "partition", RENDERED_PARTITION_KEYS,
                  RESERVED_PARTITION_KEYS, "PartitionName=") for pi, p in enumerate(slurm.partitions)]
    for loc, extra, group, rendered, reserved, kind in sections:
        if not extra:
            continue
        known = {**(GLOBAL_KEYS if group == "global" else PARTITION_KEYS), **every_release(group)}
        own = release_keys(major, group)  # the target release's manual, where corral has read it
        ours = {k.lower(): v for k, v in rendered.items()}
        relied = {k.lower(): v for k, v in reserved.items()}
        for key in extra:
            lkey, at = key.lower(), where(loc + (key,), key=True)
            dotted = ".".join(str(p) for p in loc) + "." + (key if key.isalnum() else repr(key))
            if lkey in ours:
                fix = f"use the spec key {ours[lkey]}" if ours[lkey] else "remove it: corral sets it itself"
                problems.append(Problem(at, f"{dotted}: corral renders this key", key, fix))
            elif lkey in relied:
                problems.append(Problem(at, f"{dotted}: {relied[lkey]}", key, "remove it"))
            elif lkey not in known:
                free = [k for lk, k in known.items() if lk not in ours and lk not in relied]
                problems.append(Problem(at, f"{dotted}: not a {kind} parameter", key, _key_hint(key, free, kind)))
            elif own is not None and lkey not in own:
                problems.append(Problem(at, f"{dotted}: Slurm {major}'s slurm.conf(5) has no {known[lkey]} (it is a "
                                        f"parameter of Slurm {', '.join(releases_knowing(key, group)) or 'before'})",
                                        key, f"remove it, or use what slurm.conf(5) of {major} says instead"))
            elif lkey in PROGRAM_KEYS:
                problems.append(Problem(at, f"{dotted}: names a program Slurm runs (as root or SlurmUser); "
                                        "corral runs only its own", key, "remove it"))
            elif key != known[lkey]:
                problems.append(Problem(at, f"{dotted}: spell it as slurm.conf(5) does", key,
                                        f"write {known[lkey]}"))
    return problems


def _key_hint(key: str, choices: list[str], kind: str) -> str:
    if kind == "slurm.conf" and key.lower() in PARTITION_KEYS:
        return f"{PARTITION_KEYS[key.lower()]} is a partition parameter: set it in slurm.partitions[].extra"
    if kind != "slurm.conf" and key.lower() in GLOBAL_KEYS:
        return f"{GLOBAL_KEYS[key.lower()]} is a global parameter: set it in slurm.extra"
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.7)
    return f"did you mean {close[0]!r}?" if close else "see slurm.conf(5) for the parameters Slurm knows"


def check_virtual(cluster: Cluster, where: Where) -> list[Problem]:
    v = cluster.spec.virtual
    if v is None:
        return []
    problems, net = [], v.subnet
    if net.prefixlen > 29:
        return [Problem(where(("virtual", "subnet")), "subnet too small", str(net), "use a /24")]
    if not net.is_private:
        problems.append(Problem(where(("virtual", "subnet")), "virtual subnet must be a private range",
                                str(net), "use e.g. 10.213.0.0/24"))
    gateway = net.network_address + 1
    last = net.broadcast_address - 1
    first = gateway + 9 if int(gateway) + 9 <= int(last) else gateway + 1
    for n in cluster.nodes:
        ip = ipaddress.ip_address(n.address)
        if ip not in net or ip in (net.network_address, net.broadcast_address, gateway):
            problems.append(Problem(where(("nodes", n.group, "addresses")),
                                    f"node {n.name}: address not usable in virtual subnet {net} "
                                    f"({gateway} is the host side)", n.address,
                                    f"use addresses from {first} to {last}"))
    return problems


def check_monitoring(cluster: Cluster, where: Where) -> list[Problem]:
    m, problems = cluster.spec.monitoring, []
    if not m.enabled:
        return []
    ports = {"prometheus_port": m.prometheus_port, "alertmanager_port": m.alertmanager_port,
             "node_exporter_port": m.node_exporter_port, "slurm_exporter_port": m.slurm_exporter_port}
    if m.grafana.enabled:
        ports["grafana.port"] = m.grafana.port
    seen: dict[int, str] = {}
    for key, port in ports.items():
        if port in seen:
            problems.append(Problem(where(("monitoring", *key.split("."))),
                                    f"port {port} is also monitoring.{seen[port]}", str(port),
                                    "give every monitoring service its own port"))
        seen.setdefault(port, key)
    a = m.alerts
    for i, r in enumerate(a.receivers):
        if r.email and a.smtp is None:
            problems.append(Problem(where(("monitoring", "alerts", "receivers", i, "email")),
                                    f"receiver {r.name!r} sends e-mail but no mail server is set", r.email,
                                    "add monitoring.alerts.smtp: {smarthost: HOST:PORT, sender: ADDRESS}"))
    names = Counter(r.name for r in a.receivers)
    for i, r in enumerate(a.receivers):
        if names[r.name] > 1:
            problems.append(Problem(where(("monitoring", "alerts", "receivers", i, "name")),
                                    "duplicate receiver name", r.name, "give every receiver a unique name"))
            names[r.name] = 0
    return problems


def check_containers(cluster: Cluster, where: Where) -> list[Problem]:
    nv, problems = cluster.spec.nvidia, []
    if nv.pyxis is not None and nv.enroot is None:
        problems.append(Problem(where(("nvidia", "pyxis")), "nvidia.pyxis needs nvidia.enroot: pyxis runs containers with enroot",
                                "pyxis", "add nvidia.enroot: {version: 3.5.0} (or remove nvidia.pyxis)"))
    if nv.pyxis is not None and "pyxis" not in schedulers.of(cluster).carries:
        problems.append(Problem(where(("nvidia", "pyxis")), "pyxis is a Slurm plugin", cluster.spec.scheduler,
                                "remove nvidia.pyxis or use scheduler: slurm"))
    for key, tool in (("enroot", nv.enroot), ("mig_parted", nv.mig_parted)):
        sums = tool.sha256 if tool is not None and isinstance(tool.sha256, dict) else {}
        unknown = sorted(set(sums) - set(tool.packages)) if sums else []
        if unknown:
            problems.append(Problem(where(("nvidia", key, "sha256")), "checksum of a package not installed",
                                    unknown[0], f"name one of: {', '.join(tool.packages)}"))
    return problems


def check_mig(cluster: Cluster, where: Where) -> list[Problem]:
    from corral.spec.mig import problems as mig_problems
    out, seen = [], set()
    for n in cluster.nodes:
        for what, value, fix in mig_problems(n.gpus):
            if (n.group, what) not in seen:
                seen.add((n.group, what))
                out.append(Problem(where(("nodes", n.group, "gpus", "mig")), f"{n.name}: {what}", value, fix))
    return out


# each scheduler's own rules and warnings, run for the spec's scheduler only
SCHEDULER_RULES = {"slurm": (check_slurm, check_ha, check_slurm_release, check_clean_jobs),
                   "kubernetes": (check_kubernetes,)}
SCHEDULER_WARNINGS = {"slurm": (slurm_release_warnings,), "kubernetes": (kubernetes_warnings,)}


def scheduler_warnings(cluster: Cluster) -> list[str]:
    return [w for rule in SCHEDULER_WARNINGS[cluster.spec.scheduler] for w in rule(cluster)]


def check_cluster(cluster: Cluster, where: Where) -> list[Problem]:
    problems = check_nodes(cluster, where) + check_os(cluster, where) + check_roles(cluster, where)
    problems += [p for rule in SCHEDULER_RULES[cluster.spec.scheduler] for p in rule(cluster, where)]
    return (problems + check_monitoring(cluster, where) + check_virtual(cluster, where)
            + check_containers(cluster, where) + check_gpu_models(cluster, where) + check_mig(cluster, where)
            + check_urls(cluster, where) + check_checksums(cluster, where) + check_storage(cluster, where)
            + check_users(cluster, where) + check_ldap(cluster, where) + check_acceptance(cluster, where)
            + check_reports(cluster, where) + check_rollout(cluster, where)
            + check_power(cluster, where) + check_bundle(cluster, where) + check_topology(cluster, where)
            + check_driver(cluster, where)
            + check_software(cluster, where) + check_easybuild(cluster, where) + check_workbench(cluster, where) + check_images(cluster, where)
            + check_support(cluster, where))


def spec_warnings(cluster: Cluster) -> list[str]:
    """What a valid spec does that is unsafe or surprising, said on every spec check, plan and apply."""
    return (download_warnings(cluster) + storage_warnings(cluster) + users_warnings(cluster) + ldap_warnings(cluster)
            + ha_warnings(cluster) + acceptance_warnings(cluster) + rollout_warnings(cluster)
            + power_warnings(cluster) + bundle_warnings(cluster) + topology_warnings(cluster)
            + release_warnings(cluster) + scheduler_warnings(cluster) + support_warnings(cluster)
            + gpu_model_warnings(cluster))
