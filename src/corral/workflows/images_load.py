"""The bundle's container images (`corral bundle build --images`) loaded into the site registry after an
apply (and so `corral up --bundle`) that uses the bundle: from the control host, over TLS trusting the
cluster's CA (or, for the site's own certificate, this host's trust store), each image an operation of
the registry node's result: `changed` when pushed, `unchanged` when the registry serves the carried digest
already, `failed` naming the image. plan shows the same ops from the registry's answer alone (asked with
a short timeout; a registry not answering yet, before its first apply, means every image would be
pushed). A bundle that carries images for a spec without a site registry is
refused before anything changes (`refuse_without_registry`)."""

from __future__ import annotations

import json
import ssl
import time
from pathlib import Path

from corral.bundle.image_push import Registry, push
from corral.bundle.images import need_site_registry
from corral.engine.results import NodeResult, OpResult, RunResult
from corral.errors import CorralError
from corral.render.registry import registry_node
from corral.render.ca_scope import ca_scope
from corral.site_ca import ca_pem


def carried(cluster) -> list[dict]:
    """The images the spec's bundle carries, from its manifest ([] when packages do not come from one)."""
    if cluster.spec.packages.source != "bundle":
        return []
    from corral.bundle.coverage import read_manifest
    from corral.bundle.serve import existing_bundle
    items = read_manifest(existing_bundle(cluster)).get("images")
    return items if isinstance(items, list) else []


def refuse_without_registry(cluster) -> None:
    items = carried(cluster)
    if items:
        need_site_registry(cluster, f"packages.bundle carries {len(items)} container image(s)")


def site_registry(cluster) -> tuple[Registry, str]:
    """The site registry as the control host reaches it, and its name as the nodes pull from it."""
    r, node = cluster.spec.images.registry, registry_node(cluster)
    assert r is not None and node is not None  # need_site_registry refused a bundle's images without one
    if r.tls.cert_file is None:  # corral's CA signed it, for the node's name and address
        context, host = ssl.create_default_context(cadata=ca_pem(cluster.state_dir, cluster.name, ca_scope(cluster))), node.address
    else:
        context, host = ssl.create_default_context(), node.name
    from corral.deploy.registry_auth import loader_secret
    from corral.render.registry_auth import LOADER
    base = f"[{host}]" if ":" in host else host
    # pushes need corral's own token (the site registry's token server); its realm names the node
    return (Registry(f"https://{base}:{r.port}", context, credentials=(LOADER, loader_secret(cluster)),
                     hosts={node.name: host}), f"{node.name}:{r.port}")


PLAN_TIMEOUT_S = 10  # plan asks the registry; a node that does not answer must not hold it up


def _name(shown: str, item: dict) -> str:
    return f"image {shown}/{item['repository']}:{item['tag']} from the bundle"


def preview(cluster, items: list[dict]) -> list[OpResult]:
    """What push_all would do, from the registry's digests alone (nothing sent)."""
    registry, shown = site_registry(cluster)
    registry.timeout = PLAN_TIMEOUT_S
    out, silent = [], None
    for item in items:
        try:
            there = None if silent else registry.digest(item["repository"], item["tag"], item["media_type"])
        except CorralError as e:
            silent, there = f"the site registry does not answer ({e.message})", None
        op = OpResult(_name(shown, item), "unchanged", f"the site registry serves {item['digest']} already") \
            if there == item["digest"] else OpResult(_name(shown, item), "changed", silent)
        out.append(op)
    return out


def push_all(cluster, items: list[dict], root: Path) -> list[OpResult]:
    """Each verified entry pushed from the unpacked bundle at root into the site registry; an OpResult each
    (a failure does not stop the next image)."""
    registry, shown = site_registry(cluster)
    out = []
    for item in items:
        name = _name(shown, item)
        start = time.monotonic()
        try:
            pushed = push(registry, item, root)
            op = OpResult(name, "changed" if pushed else "unchanged",
                          None if pushed else f"the site registry serves {item['digest']} already")
        except CorralError as e:
            op = OpResult(name, "failed", e.message)
        op.duration_s = time.monotonic() - start
        out.append(op)
    return out


def load(cluster, result: RunResult) -> bool:
    """After an apply with the bundle: its images into the site registry, as ops of the registry node's
    result (plan: what it would do); True when any image was tried. Not when the registry node was left
    out or failed (a warning)."""
    items = carried(cluster)
    if not items:
        return False
    need_site_registry(cluster, f"packages.bundle carries {len(items)} container image(s)")  # converge refused it
    node = registry_node(cluster)
    assert node is not None  # need_site_registry: a site registry, on a node of the spec (spec/rules_images.py)
    got: NodeResult | None = result.nodes.get(node.name)
    if got is None or not got.ok:
        verb = "not loaded" if result.mode == "apply" else "not checked"
        result.warnings.append(f"the bundle's {len(items)} image(s) {verb}: the registry node {node.name} "
                               f"{'was not in this run' if got is None else 'failed'}")
        return False
    from corral.bundle.serve import prepare
    try:  # the nodes' run is done and journaled: a failure here is this step's, never the run's result lost
        unpacked = prepare(cluster)[0].parent  # verified again; unpacked once (bundle/serve.py)
        items = json.loads((unpacked / "manifest.json").read_text())["images"]  # the verified manifest's
        if result.mode != "apply":
            got.ops.extend(preview(cluster, items))
            return True
        ops = push_all(cluster, items, unpacked)
    except (CorralError, OSError, ValueError) as exc:
        got.error, got.error_kind = f"the bundle's images: {getattr(exc, 'message', exc)}", "op-failed"
        return True
    got.ops.extend(ops)
    failed = [op for op in ops if op.status == "failed"]
    if failed:
        got.error, got.error_kind = f"{failed[0].name}: {failed[0].reason}", "op-failed"
    return True
