"""alertmanager.yml from the spec: receivers (webhook / e-mail) routed by severity, none by default
(alerts are then only visible in Alertmanager's UI and API). A node that is down inhibits the other
alerts of that node."""

from __future__ import annotations

import json

from corral.spec.cluster import Cluster


def render_alertmanager_yml(cluster: Cluster) -> str:
    a = cluster.spec.monitoring.alerts
    out = [f"# Managed by corral from {cluster.path.name} - do not edit"]
    if a.smtp:
        out += ["global:", f"  smtp_smarthost: {json.dumps(a.smtp.smarthost)}",
                f"  smtp_from: {json.dumps(a.smtp.sender)}",
                f"  smtp_require_tls: {'true' if a.smtp.require_tls else 'false'}"]
    out += ["route:", '  receiver: "none"', "  group_by: [alertname, cluster, node]",
            "  group_wait: 30s", "  group_interval: 5m", "  repeat_interval: 4h"]
    if a.receivers:
        out.append("  routes:")
        for r in a.receivers:
            matcher = json.dumps('severity=~"' + "|".join(r.severities) + '"')
            out += [f"    - receiver: {json.dumps(r.name)}", f"      matchers: [{matcher}]",
                    "      continue: true"]
    out += ["receivers:", '  - name: "none"']
    for r in a.receivers:
        out.append(f"  - name: {json.dumps(r.name)}")
        if r.webhook:
            out += ["    webhook_configs:", f"      - url: {json.dumps(r.webhook)}", "        send_resolved: true"]
        else:
            out += ["    email_configs:", f"      - to: {json.dumps(r.email)}", "        send_resolved: true"]
    out += ["inhibit_rules:", "  - source_matchers: [alertname=NodeDown]",
            '    target_matchers: [alertname!=NodeDown]', "    equal: [node]"]
    return "\n".join(out) + "\n"
