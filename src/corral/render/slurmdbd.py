"""slurmdbd.conf for the node with the `accounting` role (MariaDB on the same node)."""

from __future__ import annotations

from corral.errors import CorralError
from corral.render.slurm import DEFAULT_VERSION, Version, header
from corral.spec.cluster import Cluster


def _escape(password: str) -> str:
    """Slurm's config parser ends a value at whitespace, starts a comment at '#' and reads '\\' as an
    escape: escape '\\' and '#', refuse what cannot be written."""
    if not password or any(c.isspace() or c == '"' or not c.isprintable() for c in password):
        why = "(empty)" if not password else "(has a space, quote or control character)"
        raise CorralError("the database password cannot be written to slurmdbd.conf", value=why,
                          fix="use a password of printable characters without spaces or quotes")
    return password.replace("\\", "\\\\").replace("#", "\\#")


def render_slurmdbd_conf(cluster: Cluster, *, db_password: str, version: Version = DEFAULT_VERSION) -> str:
    acct = next(iter(cluster.with_role("accounting")), None)
    if acct is None:
        raise CorralError("no node has the 'accounting' role, so there is no slurmdbd to configure",
                          fix="add 'accounting' to the roles of one node (usually the controller)")
    out = header(cluster, version) + [
        "AuthType=auth/munge", f"DbdHost={acct.name}", f"DbdAddr={acct.address}", "SlurmUser=slurm",
        "StorageType=accounting_storage/mysql", "StorageHost=localhost", "StorageUser=slurm",
        f"StoragePass={_escape(db_password)}", "StorageLoc=slurm_acct_db",
        "LogFile=/var/log/slurm/slurmdbd.log", "PidFile=/run/slurmdbd.pid"]
    return "\n".join(out) + "\n"
