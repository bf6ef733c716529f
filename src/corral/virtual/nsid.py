"""EMULATION support, virtual nodes only: every node advances the kernel's per-CPU namespace ids past its
own mount namespace at boot, before slurmd (files/corral-nsid-advance says why: on kernels from 6.18 a
namespace made late, as systemd-nspawn makes a node's, can outnumber later ones, and Slurm's
job_container/tmpfs then fails a job's namespace with EINVAL on some CPUs). A real server needs none of it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SCRIPT = "usr/lib/corral-emulated/nsid-advance"
UNIT = "etc/systemd/system/corral-emulated-nsid.service"
WANTS = "etc/systemd/system/sysinit.target.wants/corral-emulated-nsid.service"
UNIT_TEXT = ("# corral virtual cluster: namespace ids above this node's own (job_container/tmpfs; see the script)\n"
             "[Unit]\nDescription=corral emulation: per-CPU namespace ids past the node's own\nDefaultDependencies=no\n"
             "Before=sysinit.target slurmd.service\n\n"
             f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/bin/python3 /{SCRIPT}\n")


def paths(root: Path) -> tuple[Path, Path, Path]:
    """What install() writes in a node's tree: the script, its unit, the unit's wants link."""
    return root / SCRIPT, root / UNIT, root / WANTS


def install(root: Path) -> None:
    """Write the script and its boot unit into a node's tree (enabled)."""
    script, unit, wants = paths(root)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_bytes(resources.files("corral.virtual").joinpath("files/corral-nsid-advance").read_bytes())
    script.chmod(0o755)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(UNIT_TEXT)
    wants.parent.mkdir(parents=True, exist_ok=True)
    if not wants.is_symlink():
        wants.symlink_to(f"/{UNIT}")
