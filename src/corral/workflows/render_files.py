"""`corral render`: the files corral would install, per node, written to a directory without contacting
any node, so a change can be reviewed as files (diff two renders). Hardware facts come from the state
dir's cache (what the last plan or apply read); what is not known is named in NOTES.txt, never invented.
Secrets are never written: a file that holds one carries a placeholder naming where the secret lives.

Kubernetes: every node file (render/kubernetes.py) and the cluster-level ones (render/gpu_operator.py).
Slurm: the configuration files (slurm.conf, gres.conf, cgroup.conf, topology.conf, slurmdbd.conf,
prometheus.yml, /etc/hosts' block, each compute node's job environment); corral's own scripts and the
other components' files are not rendered here yet (NOTES.txt says so)."""

from __future__ import annotations

import re
from pathlib import Path

from corral.errors import CorralError
from corral.spec.cluster import Cluster

SECRET = "<secret:not-rendered:state-dir/secrets/db-password>"  # a password's characters: slurmdbd.conf checks


def _slurm_version(cluster: Cluster) -> tuple[tuple[int, int], str]:
    from corral.render.slurm import DEFAULT_VERSION
    pinned = cluster.spec.slurm.version
    if pinned:
        major, minor = (int(x) for x in pinned.split(".")[:2])
        return (major, minor), f"for Slurm {major}.{minor:02d} (slurm.version)"
    return DEFAULT_VERSION, (f"for Slurm {DEFAULT_VERSION[0]}.{DEFAULT_VERSION[1]:02d}: slurm.version is unset and "
                             "plan/apply render for the version the controller runs")


def slurm_files(cluster: Cluster, hw: dict) -> tuple[dict[str, dict[str, str]], list[str]]:
    from corral.render import render_cgroup_conf, render_gres_conf, render_slurm_conf, render_slurmdbd_conf
    from corral.render.hosts import render_hosts_block
    from corral.render.job_env import job_env_text
    from corral.render.prometheus import render_prometheus_yml
    from corral.render.topology import topology_conf
    version, said = _slurm_version(cluster)
    notes = [f"Slurm configuration rendered {said}."]
    compute = [n for n in cluster.nodes if "compute" in n.roles]
    unknown = [n.name for n in compute if n.name not in hw]
    if unknown:
        notes.append(f"No hardware facts for {', '.join(unknown)} (run corral plan once): their NodeName lines say "
                     "what the spec knows, and their job environment has no fabric settings.")
    files: dict[str, dict[str, str]] = {n.name: {} for n in cluster.nodes}
    conf = {"/etc/slurm/slurm.conf": render_slurm_conf(cluster, hw, version=version),
            "/etc/slurm/gres.conf": render_gres_conf(cluster, hw, version=version),
            "/etc/slurm/cgroup.conf": render_cgroup_conf(cluster, version=version)}
    topo = topology_conf(cluster) if cluster.spec.topology is not None else None
    if topo is not None:
        conf["/etc/slurm/topology.conf"] = topo
    for n in cluster.with_role("controller"):
        files[n.name].update(conf)
    for n in cluster.with_role("accounting"):
        files[n.name]["/etc/slurm/slurmdbd.conf"] = render_slurmdbd_conf(cluster, db_password=SECRET, version=version)
    for n in cluster.with_role("monitoring"):
        if cluster.spec.monitoring.enabled:
            files[n.name]["/etc/prometheus/prometheus.yml"] = render_prometheus_yml(cluster)
    for n in cluster.nodes:
        files[n.name]["/etc/hosts.corral-block"] = render_hosts_block(cluster, n)
    for n in compute:
        files[n.name]["/etc/corral/job-env"] = job_env_text(cluster, n, hw.get(n.name))
    notes.append("Not rendered here yet: corral's own scripts (health, job hooks, power), SSSD, storage mounts, "
                 "unit drop-ins and the NVIDIA components' files; `corral plan` shows their diffs.")
    return files, notes


def kubernetes_files(cluster: Cluster) -> tuple[dict[str, dict[str, str]], dict[str, str], list[str]]:
    from corral.render.gpu_operator import cluster_files
    from corral.render.kubernetes import node_files
    from corral.spec.rules_kubernetes import NOT_RUN
    return ({n.name: node_files(cluster, n) for n in cluster.nodes}, cluster_files(cluster),
            [NOT_RUN + ".", "Join tokens and the certificate key are made at join time and never written: a "
                            "JoinConfiguration holds @JOIN_TOKEN@, @CA_HASH@ and @CERT_KEY@, which "
                            "corral-kubeadm-join fills in a private temporary copy."])


MARK = ".corral-render"


def _fresh(out: Path) -> None:
    """An empty directory to write into: a previous render's is emptied (no stale file left to mislead a
    diff); any other non-empty directory is refused, nothing in it touched."""
    if not out.exists() or not any(out.iterdir()):
        return
    if not (out / MARK).is_file():
        raise CorralError(f"{out} is not empty and holds no earlier render", value=str(out),
                          fix="name a new or empty directory (a directory corral render wrote is replaced)")
    import shutil
    for child in out.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def _safe(path: str) -> str:
    """A node file's path as a relative file name under the node's directory."""
    return re.sub(r"[^A-Za-z0-9._/-]+", "_", path.lstrip("/"))


def render(cluster: Cluster, out: Path, node: str | None = None) -> dict:
    """Write the files under out/<node>/<path> (and out/cluster/ for Kubernetes); the summary."""
    from corral.facts.slurm import load_hw_cache
    if node is not None and node not in {n.name for n in cluster.nodes}:
        raise CorralError(f"--node {node}: no such node in the spec", value=node,
                          fix="name a node of the spec (corral spec check lists them)")
    _fresh(out)
    if cluster.spec.scheduler == "kubernetes":
        per_node, whole, notes = kubernetes_files(cluster)
    else:
        (per_node, notes), whole = slurm_files(cluster, load_hw_cache(cluster.state_dir)), {}
    written: dict[str, list[str]] = {}
    for name, files in per_node.items():
        if node is not None and name != node:
            continue
        for path, text in sorted(files.items()):
            dest = out / name / _safe(path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
            written.setdefault(name, []).append(path)
    if node is None:
        for fname, text in whole.items():
            (out / "cluster").mkdir(parents=True, exist_ok=True)
            (out / "cluster" / fname).write_text(text)
            written.setdefault("cluster", []).append(fname)
    out.mkdir(parents=True, exist_ok=True)
    (out / "NOTES.txt").write_text("\n".join(notes) + "\n")
    (out / MARK).write_text("written by corral render: the next render into this directory replaces it\n")
    return {"ok": True, "dir": str(out), "scheduler": cluster.spec.scheduler, "files": written, "notes": notes}
