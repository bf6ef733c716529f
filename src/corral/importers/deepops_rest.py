"""What the import says about the DeepOps settings its mappers did not report themselves: each variable it
carried (mapped), each switch corral has built in (mapped, or changed on purpose where DeepOps had it off),
and every other group and variable with its place and why it is not carried (the table in deepops_vars)."""

from __future__ import annotations

from corral.importers.deepops_inventory import GROUP_NOTES, OTHER_GROUPS, Inventory, Var, canon
from corral.importers.deepops_report import CHANGED, MAPPED as MAPPED_GROUP, Report
from corral.importers.deepops_vars import BUILT_IN, MAPPED, PER_HOST, applies, reason_for, truthy


def report_rest(report: Report, inv: Inventory, used: set[str], other: tuple[str, ...], umbrella: str,
                origin: dict[str, str], scheduler: str) -> None:
    """One item per group or variable the mappers did not report: its place, its name and why."""
    everywhere = sum(OTHER_GROUPS.values(), ("all", "ungrouped"))
    for gname, g in inv.groups.items():
        c = canon(gname)
        if c in GROUP_NOTES and c not in other and inv.has_members(gname):
            report.note(g.where, f"[{gname}]", GROUP_NOTES[c])
        elif c not in everywhere and inv.has_members(gname):
            report.note(g.where, f"[{gname}]", "not a DeepOps role group; no cluster.yaml role")
    for gname in dict.fromkeys(list(inv.groups) + list(inv.group_vars)):
        scope = gname == "all" or canon(gname) == umbrella  # where the cluster-wide settings were read
        for layer in filter(None, (inv.groups[gname].vars if gname in inv.groups else {},
                                   inv.group_vars.get(gname, {}))):
            why = "a group of the other scheduler" if canon(gname) in other else \
                None if gname in inv.groups else "a group not in the inventory"
            if why:
                files = ", ".join(sorted({v.where.rsplit(":", 1)[0] for v in layer.values()}))
                report.note(files, "", f"settings of [{gname}], {why}")
                continue
            for k, v in layer.items():
                if k in used and (scope or k in PER_HOST):
                    continue
                if k in BUILT_IN and scope and applies(k, scheduler):
                    _built_in(report, k, v, scheduler)
                    continue
                report.note(v.where, k, f"set for [{gname}] only; the import reads {MAPPED[k]} from [all] and "
                            f"[{umbrella}]: move it there or set it in cluster.yaml"
                            if _cluster_wide(k, scheduler) and not scope else reason_for(k, scheduler))
    for name, host in origin.items():
        for layer in (inv.hosts[host].vars, inv.host_vars.get(host, {})):
            for k, v in layer.items():
                if k in used and k in PER_HOST:
                    continue
                report.note(v.where, f"{k} ({name})", f"a per-host value; cluster.yaml sets {MAPPED[k]} for the "
                            "whole cluster: not carried" if _cluster_wide(k, scheduler) else reason_for(k, scheduler))


def report_mapped(report: Report, inv: Inventory, used: set[str], origin: dict[str, str],
                  cluster_var) -> None:
    """A mapped item for each variable a mapper used and said nothing about (it was carried as it was)."""
    for name in sorted(used & set(MAPPED) - PER_HOST, key=list(MAPPED).index):
        var = cluster_var(name)
        if var is not None and not report.named(name):
            report.add(MAPPED_GROUP, var.where, name, f"carried to {MAPPED[name]}", MAPPED[name])
    for name in sorted(used & PER_HOST, key=list(MAPPED).index):
        found = [v for host in origin.values() if (v := inv.host_var(host, name)) is not None]
        if found and not report.named(name):
            report.add(MAPPED_GROUP, found[0].where, name, f"carried to {MAPPED[name]} ({len(found)} hosts)",
                       MAPPED[name])


def _built_in(report: Report, name: str, var: Var, scheduler: str) -> None:
    """A switch corral has built in: mapped where DeepOps had it on, changed on purpose where off."""
    on = truthy(var) or str(var.value).strip().lower() in ("started", "running")
    report.add(MAPPED_GROUP if on else CHANGED, var.where, name, reason_for(name, scheduler), "(built in)")


def _cluster_wide(var: str, scheduler: str) -> bool:  # a mapped variable the import reads once per cluster
    return var in MAPPED and var not in PER_HOST and applies(var, scheduler)
