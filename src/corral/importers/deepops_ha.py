"""DeepOps' Slurm high availability (slurm_enable_ha with two hosts in [slurm-master], the state in
slurm_ha_state_save_location, /sw/slurm by default) -> the 2nd master's controller role and
slurm.state_save_location, when that directory is on an NFS mount the import carried (deepops_storage.py).

corral needs the state on a mount of both controllers (spec/rules_ha.py). DeepOps' primary is usually the
NFS server and used the exported directory directly; the import has it mount its own export too, so both
controllers see one state through the same path (reported as changed on purpose), and keeps the export's
no_root_squash if DeepOps had it (the controllers' root makes the state directory through the mount).
Otherwise the 2nd master is imported without the controller role, and the report says what to add."""

from __future__ import annotations

from collections.abc import Callable

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_report import MAPPED, Report
from corral.importers.deepops_storage import StorageImport, abs_path
from corral.importers.deepops_vars import truthy
from corral.spec.shared import under

DEEPOPS_STATE = "/sw/slurm"  # roles/slurm/defaults/main.yml slurm_ha_state_save_location
HOW = ("add a storage.mounts entry for it (roles: [controller]), set slurm.state_save_location and give {host} the "
       "controller role (docs/components/slurm.md, High availability)")


def import_ha(masters: list[str], where: str, get: Callable[[str], Var | None], storage: StorageImport,
              roles: dict[str, list[str]], report: Report, used: set[str]) -> str | None:
    """The StateSaveLocation to write (None: the default); `masters`: [slurm-master]'s node names, `where`:
    that group's place in the inventory."""
    on, loc = get("slurm_enable_ha"), get("slurm_ha_state_save_location")
    used |= {n for n, v in (("slurm_enable_ha", on), ("slurm_ha_state_save_location", loc)) if v is not None}
    text = str(loc.value).strip() if loc is not None else DEEPOPS_STATE
    path = abs_path(text) if "{{" not in text else None
    backup = masters[1] if len(masters) > 1 else None
    head = ("imported without the controller role: a backup controller needs slurmctld's StateSaveLocation on "
            "shared storage mounted on both controllers")
    if not truthy(on, False):
        if backup is not None:
            report.note(where, f"[slurm-master] {backup}", f"{head}; slurm_enable_ha is off (DeepOps ran no backup "
                        f"either): to add one, {HOW.format(host=backup)}")
        if loc is not None:
            report.note(loc.where, "slurm_ha_state_save_location", "not used: slurm_enable_ha is off")
        return None
    if backup is None:
        report.note(on.where, "slurm_enable_ha", "a backup controller needs slurmctld's StateSaveLocation on shared "
                    "storage and a 2nd host in [slurm-master]; this inventory has one: no backup controller")
        if loc is not None:
            report.note(loc.where, "slurm_ha_state_save_location", "not carried: no backup controller")
        return None
    mount = max((m for m in storage.mounts if path and under(path, m["path"])), key=lambda m: len(m["path"]),
                default=None)
    if mount is None or path is None:
        why = f"{text} is on no NFS mount the import carried" if path else f"{text!r} is a Jinja template"
        report.note(where, f"[slurm-master] {backup}", f"{head}; {why}: {HOW.format(host=backup)}")
        report.note(on.where, "slurm_enable_ha", f"a backup controller needs slurmctld's StateSaveLocation on shared "
                    f"storage mounted on both controllers: {why}")
        report.note(loc.where if loc else on.where, "slurm_ha_state_save_location", "set slurm.state_save_location "
                    f"to a directory on a storage.mounts entry mounted on both controllers ({why})")
        return None
    missing = [m for m in masters[:2] if m not in mount["_clients"]]
    mount["_clients"] += missing
    if missing:
        report.change(mount["_at"], mount["_subject"], f"{', '.join(missing)} mount{'s' if len(missing) == 1 else ''} "
                      f"{mount['path']} too: both controllers read slurmctld's state ({path}) through the same mount "
                      "(DeepOps' primary used the server's directory)", "storage.mounts[].nodes")
    if "server" not in mount:
        storage.keep_root |= {e["path"] for e in storage.exports if under(mount["export"], e["path"])}
    roles[backup].insert(0, "controller")
    report.add(MAPPED, where, f"[slurm-master] {backup}", "the backup controller (slurm_enable_ha)",
               "nodes[].roles (controller)")
    return path
