"""`nvidia.driver.branch` resolved before a plan or apply reads the spec (workflows/converge.py): each GPU compute
node is asked, over SSH and bounded, for its installed driver package and the versions its repositories carry
(`apt-cache madison`: apt's own view of indexes it verified); render/driver_branch.py chooses. The run then holds
that exact version: the plan shows it, the pin names it, a second run on the same nodes finds it installed and
changes nothing. What could not be resolved is a UsageError naming each node's answer."""

from __future__ import annotations

from dataclasses import replace

from corral.engine.remote import as_root, run_on
from corral.engine.shell import q
from corral.errors import CorralError, UsageError
from corral.parallel import pmap
from corral.render.driver_branch import choose, index_versions, madison_versions
from corral.render.nvidia import driver_nodes, driver_packages
from corral.spec.releases import release

ASK_TIMEOUT_S = 30


def _ask(cluster, node, package: str) -> tuple[str, str | None, list[str], str]:
    """(node, installed version or None, available versions, what went wrong or '')."""
    command = (f"dpkg-query -W -f '${{Version}}\\n' {q(package)} 2>/dev/null || echo; "
               f"apt-cache madison {q(package)} 2>/dev/null || true")
    try:
        p = run_on(cluster, node.name, as_root(cluster, command), timeout=ASK_TIMEOUT_S)
    except CorralError as exc:
        return node.name, None, [], str(exc)
    if p.returncode != 0:
        return node.name, None, [], f"rc={p.returncode}: {p.stderr.strip()[-160:]}"
    first, _, rest = p.stdout.partition("\n")
    return node.name, first.strip() or None, madison_versions(rest), ""


def resolve(cluster):
    """(the cluster with nvidia.driver.version set from its branch, the line saying so); unchanged, None where the
    spec names a version or no node runs a managed driver."""
    driver = cluster.spec.nvidia.driver
    nodes = driver_nodes(cluster)
    if driver is None or driver.version is not None or not nodes:
        return cluster, None
    asked = pmap(lambda n: _ask(cluster, n, _package(driver, n)), nodes)
    answered = [a for a in asked if not a[3]]
    available = [v for _, _, vs, _ in answered for v in vs] + _served(cluster, nodes, driver)
    choice = choose(driver.branch, {n: v for n, v, _, _ in answered}, available)
    if choice.version is None or not answered:
        said = "; ".join(f"{n}: {err or 'installed ' + (v or 'none')}" for n, v, _, err in asked)
        why = choice.why if answered else "no GPU node answered"
        raise UsageError(f"nvidia.driver.branch {driver.branch}: not resolved to a version: {why} ({said})",
                         value=driver.branch,
                         fix=f"set nvidia.driver.version, or make {_package(driver, nodes[0])} of branch "
                             f"{driver.branch} available in the nodes' repositories (source: {driver.source})")
    resolved = driver.model_copy(update={"version": choice.version})
    nvidia = cluster.spec.nvidia.model_copy(update={"driver": resolved})
    line = f"nvidia.driver.branch {driver.branch}: {choice.version} ({choice.why}); this run pins it"
    return replace(cluster, spec=cluster.spec.model_copy(update={"nvidia": nvidia})), line


def _served(cluster, nodes, driver) -> list[str]:
    """On the virtual cluster, the index of corral's repository (the nodes' one source), read on the control host:
    the nodes' apt lists are refreshed by apply, after this."""
    if cluster.spec.virtual is None or cluster.spec.packages.source == "bundle":
        return []
    from corral.virtual.repo import repo_dir
    out = []
    for os_name in sorted({n.os for n in nodes}):
        index = repo_dir(os_name) / "Packages"
        if index.is_file():
            out += index_versions(index.read_text(), _package(driver, next(n for n in nodes if n.os == os_name)))
    return out


def _package(driver, node) -> str:
    rel = release(node.os)
    return driver_packages(driver, node, rel.distro, rel.version)[0]
