"""docs/migrating-from-deepops.md's table of DeepOps variables, printed from the importer's own table
(deepops_vars) so the page cannot drift from what the import does: `python -m corral.importers.deepops_doc`
prints it, and tests/unit/test_deepops_doc.py checks that the page holds exactly this text."""

from __future__ import annotations

import sys

from corral.importers.deepops_vars import BUILT_IN, KNOWN, MAPPED, SLURM_ONLY, applies, reason_for

BEGIN = "<!-- BEGIN generated: python -m corral.importers.deepops_doc -->"
END = "<!-- END generated -->"
# what the import changes on purpose when it carries a mapped variable (its report says it per value)
CHANGES = {
    "nfs_exports": "no_root_squash (and other root-equivalent options) become root_squash, except on the export "
                   "holding the Slurm HA state; clients `*` or a host become `cluster` (the nodes that mount it)",
    "nfs_mounts": "nosuid and nodev added",
    "slurm_version": "the major release of the distribution's packages (no source build); a release corral does "
                     "not know is not carried",
    "users": "no password hash (the account is adopted with its password), no privileged group, homes at "
             "identity.homes/NAME",
    "slurm_enable_ha": "only with the state on an imported mount; the primary mounts that export too",
    "slurm_restrict_node_access": "false: pam_slurm_adopt off (DeepOps still adopted sessions)",
    "nvidia_driver_branch": "kept as the branch: plan resolves it to an exact version (the nodes' driver on it, else its newest in their repositories) and the run pins that",
    "ansible_ssh_common_args": "only the jump host",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def side(var: str) -> str:
    """Which cluster.yaml a mapped or built-in variable is carried into (the rest: -)."""
    if var not in MAPPED and var not in BUILT_IN:
        return "-"
    slurm, k8s = applies(var, "slurm"), applies(var, "kubernetes")
    return "both" if slurm and k8s else "Slurm" if slurm or var in SLURM_ONLY else "Kubernetes"


def table() -> str:
    """The Markdown table: every DeepOps variable the import knows, its corral key (or why none)."""
    rows = ["| DeepOps variable | for | corral | notes |", "|---|---|---|---|"]
    for var in sorted(KNOWN):
        if var in MAPPED:
            key, _, rest = MAPPED[var].partition(" ")
            corral, notes = f"`{key}`" + (f" {rest}" if rest else ""), CHANGES.get(var, "")
        elif var in BUILT_IN:
            corral, notes = "built in", BUILT_IN[var][0]
        else:
            corral, notes = "not carried", reason_for(var)
        rows.append(f"| `{var}` | {side(var)} | {_cell(corral)} | {_cell(notes)} |")
    return "\n".join(rows) + "\n"


def section() -> str:
    """The generated part of the page, markers included."""
    return f"{BEGIN}\n{table()}{END}\n"


if __name__ == "__main__":
    sys.stdout.write(section())
