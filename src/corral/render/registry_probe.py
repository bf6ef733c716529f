"""Can each pull-through cache reach its upstream? Rendered (pure): a probe script run by a systemd timer on
the registry node, writing node-exporter textfile metrics that the alert RegistryUpstreamUnreachable reads
(render/alerts.py).

distribution (2.8) exports no upstream errors as Prometheus metrics: its proxy counts requests, hits and
misses (expvar, /debug/vars), and a running cache answers its own /v2/ whatever its upstream does. So the
probe asks each upstream's /v2/ itself, from the registry node (the cache's network path), trusting the
node's CA store as the cache does: any HTTP answer below 500 (200, or the 401 of a registry that wants a
token) is up; no answer within the bound, a TLS failure or a 5xx is down. The upstream's credentials are
not tried (they stay in the cache's file). Used by deploy/registry.py."""

from __future__ import annotations

from shlex import quote as q
from corral.render.registry import API_HOST, Instance

NAME = "corral-registry-upstreams"
SCRIPT = f"/usr/local/sbin/{NAME}"
SERVICE = f"/etc/systemd/system/{NAME}.service"
TIMER = f"/etc/systemd/system/{NAME}.timer"
METRICS = f"/var/lib/prometheus/node-exporter/{NAME}.prom"  # node-exporter's textfile directory
INTERVAL_S = 60
CONNECT_S, MAX_S = 10, 20  # per upstream: curl's bounds


def caches(insts: list[Instance]) -> list[Instance]:
    return [i for i in insts if i.upstream]


def probe_script(insts: list[Instance]) -> str:
    """POSIX sh: one curl per upstream (bounded), the metrics written to a temporary file and renamed, so
    node-exporter never reads half of them. Each upstream is host[:port] (spec/rules_images.py) and quoted."""
    lines = ["#!/bin/sh", "# Managed by corral (images.registry.cache): can each cache reach its upstream?",
             "set -u", f"out={q(METRICS)}", 'tmp="$out.$$"', "trap 'rm -f \"$tmp\"' EXIT",
             "probe() {  # $1 the upstream (the metric's label), $2 its registry API URL",
             f"    code=$(curl -sS -o /dev/null --connect-timeout {CONNECT_S} --max-time {MAX_S} "
             "-w '%{http_code}' \"$2/v2/\" 2>/dev/null) || code=000",
             '    case $code in [1-4]??) up=1 ;; *) up=0 ;; esac',
             '    printf \'corral_registry_upstream_up{registry="%s"} %s\\n\' "$1" "$up"',
             '    printf \'corral_registry_upstream_probe_timestamp_seconds{registry="%s"} %s\\n\' "$1" "$(date +%s)"',
             "}", "{",
             "    echo '# HELP corral_registry_upstream_up 1 when the upstream of a pull-through cache answered "
             "its /v2/ from the registry node, 0 when it did not'",
             "    echo '# TYPE corral_registry_upstream_up gauge'",
             "    echo '# HELP corral_registry_upstream_probe_timestamp_seconds when the upstream was last asked'",
             "    echo '# TYPE corral_registry_upstream_probe_timestamp_seconds gauge'"]
    for i in caches(insts):
        lines.append(f"    probe {q(i.upstream)} {q('https://' + API_HOST.get(i.upstream, i.upstream))}")
    lines += ['} > "$tmp" && chmod 644 "$tmp" && mv -f "$tmp" "$out"']
    return "\n".join(lines) + "\n"


def service_unit(insts: list[Instance]) -> str:
    bound = (MAX_S + 5) * len(caches(insts)) + 10
    return (f"# Managed by corral (images.registry.cache)\n[Unit]\nDescription=corral: can each registry cache "
            f"reach its upstream (node-exporter textfile metrics)\nAfter=network-online.target\n\n[Service]\n"
            f"Type=oneshot\nExecStart={SCRIPT}\nTimeoutStartSec={bound}\nNoNewPrivileges=yes\nProtectSystem=strict\n"
            f"ProtectHome=yes\nPrivateTmp=yes\nReadWritePaths={METRICS.rsplit('/', 1)[0]}\n")


def timer_unit() -> str:
    return (f"# Managed by corral (images.registry.cache)\n[Unit]\nDescription=corral: probe the registry caches' "
            f"upstreams every {INTERVAL_S} s\n\n[Timer]\nOnBootSec=30\nOnUnitActiveSec={INTERVAL_S}\nAccuracySec=5\n\n"
            "[Install]\nWantedBy=timers.target\n")
