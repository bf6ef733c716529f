"""DeepOps' proxy (http_proxy, https_proxy, no_proxy in group_vars/all.yml) -> cluster.yaml's `proxy:`.

corral threads it through apt, its downloads, /etc/environment and the container engine, and always
adds the cluster's own names and addresses to no_proxy. A value corral refuses (a path, or credentials,
which would land in every node's /etc/environment) is listed without being repeated."""

from __future__ import annotations

import json
from collections.abc import Callable

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_nvidia import invalid
from corral.importers.deepops_report import Report
from corral.spec.models_packages import ProxySpec

KEYS = (("http_proxy", "http"), ("https_proxy", "https"), ("no_proxy", "no_proxy"))


def proxy_lines(get: Callable[[str], Var | None], report: Report, used: set[str]) -> list[str]:
    """Top-level YAML (`proxy:` and its keys; empty: no proxy)."""
    out: dict[str, object] = {}
    for name, key in KEYS:
        var = get(name)
        if var is None:
            continue
        used.add(name)
        raw = var.value
        value = [p.strip() for p in raw.split(",") if p.strip()] if key == "no_proxy" and isinstance(raw, str) \
            else raw if isinstance(raw, list) else str(raw).strip()
        if "{{" in str(value):
            report.note(var.where, name, f"a Jinja template, not evaluated: set proxy.{key} by hand")
        elif value and (bad := invalid(ProxySpec, **{key: value})):
            report.note(var.where, name, f"not carried (the value is not repeated here): {bad}; set proxy.{key}")
        elif value:
            out[key] = value
    return ["proxy:"] + [f"  {k}: {json.dumps(v)}" for k, v in out.items()] if out else []
