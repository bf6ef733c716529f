"""`corral render`: the files corral would install, per node, written to a directory without contacting
any node, so a change can be reviewed as files (diff two renders). Hardware facts come from the state
dir's cache (what the last plan or apply read); what is not known is named in NOTES.txt, never invented.
Secrets are never written: a file that holds one carries a placeholder naming where the secret lives.

Every file the spec's declared components install on each node, for its roles, as apply installs it (configuration,
corral's own programs, unit files and drop-ins, pins and apt sources, marked blocks as PATH.corral-block), each from
the function its deploy calls: Slurm's in workflows/render_slurm.py (and render_images.py,
render_workbench.py), Kubernetes' in workflows/render_kubernetes.py, with its cluster-level objects under cluster/.
What depends on the live node (a file corral edits in place, a record of the node's state, what a build makes there)
is named in NOTES.txt. tests/unit/test_render_every_file.py holds render to what the run's record says apply writes."""

from __future__ import annotations

import re
from pathlib import Path

from corral.errors import CorralError, UsageError
from corral.spec.cluster import Cluster

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
    names = [n.name for n in cluster.nodes]
    if node is not None and node not in names:
        import difflib
        close = sorted(difflib.get_close_matches(node, names, n=3),
                       key=lambda c: (-difflib.SequenceMatcher(None, node, c).ratio(), c))  # ties: by name
        raise UsageError(f"--node {node}: no such node in the spec", value=node,
                         fix=(f"did you mean {' or '.join(close)}? " if close else "name a node of the spec ")
                         + "(`corral spec show` lists them)")
    _fresh(out)
    from corral.workflows import flows
    per_node, whole, notes = flows.of(cluster).files(cluster)
    written: dict[str, list[str]] = {}
    for name, files in per_node.items():
        if node is not None and name != node:
            continue
        for path, text in sorted(files.items()):
            dest = out / name / _safe(path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):  # as installed (e.g. a binary keyring)
                dest.write_bytes(text)
            else:
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
