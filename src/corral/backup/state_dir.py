"""The shell commands backup and restore run on slurmctld's StateSaveLocation (spec/shared.py:
state_save_location), wherever it is: a local directory, or a shared mount (a mount point cannot be
moved away, and an NFS export that squashes root lets only slurm read and write the files). So the
files are read and written as slurm (`runuser -u slurm --`); the directory itself stays, only its
contents are kept aside, emptied and unpacked. A backup's archive holds one top directory (the state
directory's name when it was taken): restore strips it, so a backup restores into any location.
"""

from __future__ import annotations

import posixpath

from corral.engine.shell import q

AS_SLURM = "runuser -u slurm --"  # tests run the commands as themselves with as_slurm=""
# slurm cannot enter root's home, where an SSH command starts: find and tar as slurm fail there
# ("Failed to restore initial working directory"), so every command starts from /
HOME_FREE = "cd / && "


def pack_command(state: str, as_slurm: str = AS_SLURM) -> str:
    """The state directory as tar.gz on stdout (tar's "file changed as we read it", rc 1, is fine:
    slurmctld writes each state file to a new name and renames it into place)."""
    parent, base = posixpath.split(state)
    return (f"{HOME_FREE}{as_slurm} tar -C {q(parent)} --warning=no-file-changed --warning=no-file-removed -czf - {q(base)}; "
            "rc=$?; [ $rc -le 1 ]")


def ready_command(state: str) -> str:
    """Restore's precondition on the controller: the state directory (made by `corral apply`) and slurm."""
    return f"test -d {q(state)} && id slurm >/dev/null"


def keep_command(state: str, kept: str, keep_dir: str, as_slurm: str = AS_SLURM) -> str:
    """The current contents copied to `kept` (0700, root's) and the state directory emptied."""
    return (f"{HOME_FREE}set -o pipefail && install -d -m 700 {q(keep_dir)} && install -d -m 700 {q(kept)} && "
            f"{as_slurm} tar -C {q(state)} -cf - . | tar -C {q(kept)} -xpf - && "
            f"{as_slurm} find {q(state)} -mindepth 1 -delete")


def unpack_command(state: str, as_slurm: str = AS_SLURM) -> str:
    """The backup's state (tar.gz on stdin) unpacked into the state directory, its top directory stripped."""
    return f"{HOME_FREE}{as_slurm} tar -C {q(state)} --strip-components=1 -xzf -"


def put_back_command(state: str, kept: str, as_slurm: str = AS_SLURM) -> str:
    """Undo of keep_command: the state directory emptied and the kept contents copied back."""
    return (f"{HOME_FREE}set -o pipefail && {as_slurm} find {q(state)} -mindepth 1 -delete && "
            f"tar -C {q(kept)} -cf - . | {as_slurm} tar -C {q(state)} -xf -")
