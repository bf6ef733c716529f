"""The site's proxy (spec `proxy:`) as the files that carry it (pure):

- /etc/environment: a marked block (http_proxy, https_proxy, no_proxy, and their upper-case forms, which
  curl, pip and most tools read); pam_env reads it for every SSH session (corral's own commands and its
  curl downloads included), su, cron, and so for users' shells and their Slurm jobs.
- /etc/apt/apt.conf.d/80corral-proxy: Acquire::http(s)::Proxy, and "DIRECT" for each no_proxy host
  (apt matches host names exactly; domains and networks it cannot: they are said in the file).
- a systemd drop-in for the container engine (docker, containerd), whose daemon pulls images itself.

no_proxy always holds localhost and the cluster's node names and addresses: nodes never reach each other
through the proxy."""

from __future__ import annotations

import ipaddress

from corral.errors import CorralError
from corral.spec.cluster import Cluster

BEGIN, END = "# BEGIN corral proxy", "# END corral proxy"
APT_CONF = "/etc/apt/apt.conf.d/80corral-proxy"
ENVIRONMENT = "/etc/environment"
HEADER = "# Managed by corral (spec proxy:)"


def no_proxy(cluster: Cluster) -> list[str]:
    p = cluster.spec.proxy
    own = ["localhost", "127.0.0.1", "::1"] + [x for n in cluster.nodes for x in (n.name, n.address)]
    out: list[str] = []
    for entry in [*(p.no_proxy if p else []), *own]:
        if entry not in out:
            out.append(entry)
    return out


def environment_block(cluster: Cluster) -> str:
    """corral's block of /etc/environment ("" without a proxy: the block goes)."""
    p = cluster.spec.proxy
    if p is None or not (p.http or p.https):
        return ""
    lines = [BEGIN]
    for key, url in (("http_proxy", p.http), ("https_proxy", p.https)):
        if url:
            lines += [f"{key}={url}", f"{key.upper()}={url}"]
    skip = ",".join(no_proxy(cluster))
    lines += [f"no_proxy={skip}", f"NO_PROXY={skip}", END]
    return "\n".join(lines) + "\n"


def merge_block(current: str, block: str) -> str:
    """Replace corral's proxy block (or append it; remove it when `block` is ""), keep every other line.
    Markers that are not one BEGIN followed by one END leave the file as it is (a CorralError)."""
    marks = [line.strip() for line in current.splitlines() if line.strip() in (BEGIN, END)]
    if marks not in ([], [BEGIN, END]):
        raise CorralError(f"corral's markers in {ENVIRONMENT} are not one {BEGIN!r} line followed by one {END!r} "
                          "line; the file was left as it is", where=ENVIRONMENT, value=marks,
                          fix=f"edit the node's {ENVIRONMENT}: delete the broken block, then apply again")
    out, skipping = [], False
    for line in current.splitlines():
        if line.strip() == BEGIN:
            skipping = True
        elif line.strip() == END:
            skipping = False
        elif not skipping:
            out.append(line)
    return "\n".join(out) + ("\n" if out else "") + block


def apt_conf(cluster: Cluster) -> str | None:
    p = cluster.spec.proxy
    if p is None or not (p.http or p.https):
        return None
    lines = [HEADER]
    for scheme, url in (("http", p.http), ("https", p.https)):
        if url:
            lines.append(f'Acquire::{scheme}::Proxy "{url}";')
    hosts, other = [], []
    for entry in no_proxy(cluster):
        (other if entry.startswith(".") or ":" in entry or _network(entry) else hosts).append(entry)
    for h in hosts:
        for scheme, url in (("http", p.http), ("https", p.https)):
            if url:
                lines.append(f'Acquire::{scheme}::Proxy::{h} "DIRECT";')
    if other:
        lines.append(f"# apt matches host names only; not these domains, networks or IPv6 addresses: {', '.join(other)} (go through the proxy for apt)")
    return "\n".join(lines) + "\n"


def _network(entry: str) -> bool:
    if "/" not in entry:
        return False
    try:
        ipaddress.ip_network(entry, strict=False)
        return True
    except ValueError:
        return False


def engine_dropin(cluster: Cluster) -> str | None:
    """[Service] Environment= for dockerd/containerd (they pull images themselves); None without a proxy."""
    p = cluster.spec.proxy
    if p is None or not (p.http or p.https):
        return None
    env = [f"HTTP_PROXY={p.http}"] if p.http else []
    env += [f"HTTPS_PROXY={p.https}"] if p.https else []
    env.append(f"NO_PROXY={','.join(no_proxy(cluster))}")
    return HEADER + "\n[Service]\n" + "".join(f'Environment="{e}"\n' for e in env)
