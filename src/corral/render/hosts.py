"""/etc/hosts block rendered from the spec (never from facts gathered across hosts).

Service nodes (controller, accounting, login, monitoring, nfs, control-plane) and the controller-side
nodes list every node; a compute node lists itself and the service nodes only, so adding a compute
node changes no other compute node (Slurm reaches nodes by NodeAddr, not by name).
"""

from __future__ import annotations

from corral.errors import CorralError
from corral.spec.cluster import Cluster, Node

BEGIN = "# BEGIN corral managed hosts"
END = "# END corral managed hosts"
SERVICE_ROLES = {"controller", "accounting", "login", "monitoring", "nfs", "control-plane"}


def hosts_entries(cluster: Cluster, node: Node) -> list[Node]:
    if SERVICE_ROLES & set(node.roles):
        return list(cluster.nodes)
    return [n for n in cluster.nodes if n.name == node.name or SERVICE_ROLES & set(n.roles)]


def render_hosts_block(cluster: Cluster, node: Node) -> str:
    lines = [BEGIN] + [f"{n.address}\t{n.name}" for n in hosts_entries(cluster, node)] + [END]
    return "\n".join(lines) + "\n"


def merge_hosts(current: str, block: str) -> str:
    """Replace corral's block in /etc/hosts (or append it), drop other lines naming our nodes'
    names with another address (e.g. Debian's `127.0.1.1 <hostname>`), keep everything else.

    Markers that are not one BEGIN followed by one END (a BEGIN without its END, an END alone, two
    BEGINs, END before BEGIN) raise a CorralError and the node's file is left as it is: where
    corral's block ends is then a guess, and a wrong guess deletes the admin's lines."""
    marks = [line.strip() for line in current.splitlines() if line.strip() in (BEGIN, END)]
    if marks not in ([], [BEGIN, END]):
        raise CorralError(f"corral's markers in /etc/hosts are not one {BEGIN!r} line followed by one "
                          f"{END!r} line; the file was left as it is", where="/etc/hosts", value=marks,
                          fix="edit the node's /etc/hosts: delete the broken block's lines and markers "
                              "(corral writes the block again) or add the missing marker, then apply again")
    names = {line.split("\t")[1] for line in block.splitlines()[1:-1]}
    out, skipping = [], False
    for line in current.splitlines():
        if line.strip() == BEGIN:
            skipping = True
            continue
        if line.strip() == END:
            skipping = False
            continue
        fields = line.split("#", 1)[0].split()
        if skipping or (len(fields) >= 2 and fields[0] != "127.0.0.1" and fields[0] != "::1"
                        and set(fields[1:]) & names):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + ("\n" if out else "") + block
