"""What a node needs to converge on its own: the control host's validated spec (as JSON), the run's
id and mode, and the node-local deploys to run. No secrets: the deploys that may run node-locally
(NODE_LOCAL) need none; the others stay with the SSH engine until their secrets have a carrier."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from corral import __version__
from corral.errors import CorralError, UsageError
from corral.spec.cluster import Cluster, rebuild
from corral.spec.models import ClusterSpec

FORMAT = 1
# on the node: the rebuilt cluster's base and state dir (the environment variable: tests on the control host)
NODE_DIR = Path(os.environ.get("CORRAL_NODE_DIR", "/var/lib/corral/node"))


def node_local() -> dict:
    """{name: deploy} of the deploys a node may run on itself."""
    from corral.components.slurm import COMPONENTS
    from corral.deploy import deploy_of
    from corral.deploy.jobhooks import jobhooks
    health = next(c for c in COMPONENTS if c.name == "health")
    return {"health": deploy_of(health), "jobhooks": jobhooks}


def component_names() -> list[str]:
    """Every deploy's name (the components of every scheduler), in order."""
    from corral.components import kubernetes, slurm
    return list(dict.fromkeys(c.name for c in (*slurm.COMPONENTS, *kubernetes.COMPONENTS)))


def check_deploys(names: list[str]) -> list[str]:
    """The node-local deploys named, in the components' order; a usage error for a name that is no deploy
    (with the close ones) and for a deploy that cannot run on a node by itself."""
    known = node_local()
    if not names:
        raise UsageError("no deploy named", value="", fix=f"choose from: {', '.join(known)}")
    every = component_names()
    for name in names:
        if name not in every:
            import difflib
            close = difflib.get_close_matches(name, every, n=3)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            raise UsageError(f"no deploy named {name!r}", value=",".join(names),
                             fix=f"{hint}node-local deploys: {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"deploy {unknown[0]!r} cannot run node-locally yet", value=",".join(names),
                         fix=f"choose from: {', '.join(known)} (the others: `corral apply`)")
    return [n for n in known if n in names]  # the components' order


def make(cluster: Cluster, *, run_id: str, mode: str, deploys: list[str], runtime: str) -> dict:
    return {"format": FORMAT, "corral": __version__, "runtime": runtime, "run_id": run_id, "mode": mode,
            "deploys": check_deploys(deploys), "spec_hash": cluster.spec_hash(),
            "spec": cluster.spec.model_dump(mode="json")}


def load(text: str, base: Path | None = None) -> tuple[Cluster, dict]:
    """(cluster rebuilt on this node, the snapshot); CorralError for another corral, format or spec."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CorralError(f"the snapshot is not JSON: {exc}", fix="run corral fanout again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CorralError("the snapshot's format is not one this corral reads", value=str(data.get("format")
                          if isinstance(data, dict) else type(data).__name__), fix="run corral fanout again")
    if data.get("corral") != __version__:
        raise CorralError("the snapshot was made by another corral version", value=str(data.get("corral")),
                          fix=f"this node runs corral {__version__}: run corral fanout again")
    try:
        spec = ClusterSpec.model_validate(data["spec"])
    except (KeyError, ValidationError) as exc:
        raise CorralError(f"the snapshot's spec does not validate here: {exc}", fix="run corral fanout again") from None
    base = base or NODE_DIR
    cluster = rebuild(spec, base / "cluster.yaml")
    if cluster.spec_hash() != data.get("spec_hash"):
        raise CorralError("the snapshot's spec reads differently on this node", value=cluster.spec_hash(),
                          fix="the control host and the node run different corral code: run corral fanout again")
    cluster.spec = spec.model_copy(update={"state_dir": str(base / "state")})  # nothing of the control host's
    check_deploys(list(data.get("deploys") or []))
    if data.get("mode") not in ("plan", "apply"):
        raise CorralError("the snapshot's mode is neither plan nor apply", value=str(data.get("mode")))
    return cluster, data
