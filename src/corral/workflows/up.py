"""`corral up`, the main job: virtual cluster up -> apply -> validate -> what to try next.

Nothing here prints: the workflow's own lines go to `say`, the apply's progress to `apply_say` and
`on_event` (converge's), and the CLI renders the UpResult.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corral.checks.result import Report
from corral.checks.validate import validate
from corral.errors import UsageError
from corral.engine.results import RunResult
from corral.spec.loader import load
from corral.virtual.cluster import NodeStatus, VirtualCluster
from corral.virtual.defaults import DEFAULT_SUBNET, EXAMPLE_USER, VIRTUAL_OS, default_spec
from corral.virtual.keys import ensure_key, user_key_file
from corral.workflows.converge import converge

Say = Callable[[str], None]


def _quiet(line: str) -> None:
    pass


@dataclass
class UpResult:
    spec: Path
    nodes: list[NodeStatus]             # the virtual nodes as `virtual up` left them
    apply: RunResult
    validate: Report | None = None      # None when apply failed (nothing validated)
    try_node: str = "gpu01"             # the node the next steps ssh into
    login: tuple[str, str] | None = None  # (login node, example user) to show how users work

    @property
    def ok(self) -> bool:
        return self.apply.ok and self.validate is not None and self.validate.ok

    @property
    def checks(self) -> list:
        return self.validate.checks if self.validate else []

    def next_steps(self) -> list[tuple[str, str]]:
        """(command, comment) pairs to try on the ready cluster; empty unless ok."""
        if not self.ok:
            return []
        steps = [(f"export CORRAL_SPEC={self.spec}", ""),
                 ("corral plan", "0 changes on a converged cluster"),
                 (f"corral virtual ssh {self.try_node} nvidia-smi", "")]
        if self.login:
            node, user = self.login
            steps += [(f"corral virtual ssh {node} --user {user}", f"log in as {user} (home on shared /home)"),
                      (f"corral virtual ssh {node} --user {user} -- sbatch --gres=gpu:2 --output=%x-%j.out "
                       "--wrap 'nvidia-smi -L'", "a GPU job; its output lands in the home")]
        return steps + [("corral virtual down", "")]

    def to_json(self) -> dict:
        return {"ok": self.ok, "spec": str(self.spec), "apply": self.apply.to_json(),
                "validate": self.validate.to_json() if self.validate else None}


def bundle_section(bundle: Path, fingerprint: str | None) -> str:
    """The spec's `packages:` for a bundle (json strings are YAML flow scalars)."""
    lines = ["packages:", "  source: bundle", f"  bundle: {json.dumps(str(bundle))}"]
    if fingerprint:
        lines.append(f"  fingerprint: {json.dumps(fingerprint)}")
    return "\n".join(lines) + "\n"


def bundle_release(bundle: Path) -> str | None:
    """The release a bundle serves (its manifest's `distribution`, e.g. `debian bookworm`), so that `up --bundle`
    in a new directory makes nodes the bundle can install: a Debian 12 bundle, Debian 12 nodes. Read before the
    bundle is verified, so only matched against corral's own table (None when it names no release there); the
    verification that follows refuses a bundle that is not what it says."""
    from corral.bundle.coverage import read_manifest
    from corral.spec.rules_bundle import release_of_distribution
    rel = release_of_distribution(read_manifest(bundle).get("distribution"))
    return rel.name if rel else None


def start_virtual(directory: Path, *, compute: int = 2, gpus: int = 4, gpu_model: str = "h100",
                  subnet: str = str(DEFAULT_SUBNET), name: str = "vcluster", bundle: Path | None = None,
                  fingerprint: str | None = None, say: Say | None = None,
                  os_name: str | None = None) -> tuple[VirtualCluster, list[NodeStatus]]:
    """Write the default spec if the directory has none (with `bundle`: installing from it alone, its nodes on
    the bundle's release; with `os_name`: its nodes on that release), then bring every node up (idempotent)."""
    say = say or _quiet
    spec_file = Path(directory) / "cluster.yaml"
    if not spec_file.exists():
        spec_file.parent.mkdir(parents=True, exist_ok=True)
        user_key = user_key_file(Path(directory) / ".corral", EXAMPLE_USER)
        text = default_spec(name, compute, gpus, gpu_model, ipaddress.IPv4Network(subnet),
                            user_key=ensure_key(user_key, f"{EXAMPLE_USER}@{name}"),
                            os_name=os_name or (bundle_release(Path(bundle)) if bundle else None) or VIRTUAL_OS)
        spec_file.write_text(text + (bundle_section(Path(bundle).resolve(), fingerprint) if bundle else ""))
        say(f"wrote {spec_file}")
    cluster = load(spec_file)
    if os_name is not None and {g.os for g in cluster.spec.nodes} != {os_name}:
        raise UsageError(f"{spec_file} exists and its nodes do not all run {os_name}",
                         fix=f"set `os: {os_name}` on its node groups, or use another directory (--os is for a new "
                             "cluster)")
    if bundle is not None:
        p = cluster.spec.packages
        named = (cluster.base_dir / p.bundle).resolve() if p.bundle else None
        if p.source != "bundle" or named != Path(bundle).resolve():
            raise UsageError(f"{spec_file} exists and does not install from {bundle}",
                             fix=f"set in it: {bundle_section(Path(bundle).resolve(), fingerprint)!r}, or use "
                                 "another directory")
    if cluster.spec.packages.source == "bundle":  # its images need a site registry: refused before a node starts
        from corral.workflows.images_load import refuse_without_registry
        refuse_without_registry(cluster)
    vc = VirtualCluster(cluster)
    return vc, vc.up()


def up(directory: Path, *, say: Say | None = None, apply_say: Say | None = None,
       on_event=None, bundle: Path | None = None, fingerprint: str | None = None,
       os_name: str | None = None) -> UpResult:
    """Virtual cluster up (default spec if none), apply it all, validate when apply succeeded; with
    `bundle`, every package from that verified bundle alone."""
    say = say or _quiet
    vc, rows = start_virtual(directory, say=say, bundle=bundle, fingerprint=fingerprint, os_name=os_name)
    cluster = vc.cluster
    say(f"virtual cluster up: {len(rows)} nodes; applying")
    result = converge(cluster, "apply", limit=None, on_event=on_event, command="up", say=apply_say)
    report = validate(cluster) if result.ok else None
    compute = [n.name for n in cluster.with_role("compute")] or ["gpu01"]
    logins = [n.name for n in cluster.with_role("login") if "controller" not in n.roles]
    users = [u.name for u in cluster.spec.users if user_key_file(cluster.state_dir, u.name).exists()]
    login = (logins[0], users[0]) if logins and users else None
    return UpResult(spec=cluster.path, nodes=rows, apply=result, validate=report, try_node=compute[0],
                    login=login)

