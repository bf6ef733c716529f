"""Prometheus alert rules from the spec (/etc/prometheus/rules/corral.rules.yml).

The rules read metrics of node-exporter (`node` job, incl. its systemd collector and corral's
textfile metrics), corral's Slurm exporter (`corral_slurm_*`) and dcgm-exporter (`DCGM_FI_*`).
Each rule's `for:` can be overridden for test profiles (monitoring.alerts.for_s).
Every rule has a promtool unit test in tests/unit/promtool/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from corral.spec.cluster import Cluster

REAL_FS = 'fstype!~"tmpfs|ramfs|squashfs|overlay|nsfs|fuse.*|autofs"'


@dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    for_s: int
    severity: str
    summary: str


def rules(cluster: Cluster) -> list[Rule]:
    a, temp = cluster.spec.monitoring.alerts, cluster.spec.health.max_gpu_temp_c
    free = a.filesystem_free_percent
    return [
        Rule("NodeDown", 'up{job="node"} == 0', 120, "critical",
             "{{ $labels.node }} does not answer (node-exporter unreachable)"),
        Rule("ExporterDown", 'up{job=~"slurm|dcgm|alertmanager"} == 0', 300, "warning",
             "{{ $labels.job }} exporter on {{ $labels.node }} does not answer"),
        # images.registry: an instance down (a cache whose upstream did not answer when it started stays down)
        Rule("RegistryDown", 'up{job="registry"} == 0', 300, "warning",
             "the registry ({{ $labels.registry }}) on {{ $labels.node }} does not answer: jobs cannot pull "
             "its images"),
        # images.registry.cache: a running cache whose upstream does not answer (render/registry_probe.py asks it
        # every minute from the registry node), or a probe that stopped asking
        Rule("RegistryUpstreamUnreachable", "corral_registry_upstream_up == 0 or "
             "time() - corral_registry_upstream_probe_timestamp_seconds > 600", 300, "warning",
             "the pull-through cache of {{ $labels.registry }} on {{ $labels.node }} cannot reach its upstream (or "
             "it was not asked for 10 minutes): images it does not hold cannot be pulled"),
        # workbench.jupyterhub: the hub down, or servers failing to start (sbatch refused, a job that never
        # reached the hub, a timeout) in the last 15 minutes
        Rule("NotebookHubDown", 'up{job="jupyterhub"} == 0', 300, "warning",
             "the notebook hub on {{ $labels.node }} does not answer: users cannot log in or start notebooks"),
        Rule("NotebookSpawnsFailing",
             'increase(jupyterhub_server_spawn_duration_seconds_count{status="failure"}[15m]) > 0', 0, "warning",
             "notebook servers failed to start on the hub on {{ $labels.node }} in the last 15 minutes (the hub's "
             "log says why: journalctl -u corral-jupyterhub)"),
        Rule("SlurmctldDown", 'node_systemd_unit_state{name="slurmctld.service",state="active"} == 0 '
             'or corral_slurm_slurmctld_up == 0', 60, "critical",
             "slurmctld does not answer (seen from {{ $labels.node }})"),
        # corral's judge of slurmctld's restarts (node/ctld_restart.py) names the jobs an unclean end lost, for
        # an hour after it; systemd's count of its automatic restarts says so even where the judge did not run
        Rule("SlurmctldUncleanRestart",
             "(corral_slurmctld_lost_jobs and ignoring(job_ids) "
             "(corral_slurmctld_unclean_restart_timestamp_seconds > 0 and "
             "time() - corral_slurmctld_unclean_restart_timestamp_seconds < 3600)) "
             'or on(node) (increase(node_systemd_service_restart_total{name="slurmctld.service"}[1h]) > 0)',
             0, "critical",
             "slurmctld on {{ $labels.node }} restarted after an unclean end (kill, crash, power); jobs acknowledged "
             "to their users and not recovered (gone, their IDs handed out again): "
             "{{ if $labels.job_ids }}{{ $labels.job_ids }}{{ else }}none known{{ end }}; `corral health` names them all"),
        Rule("SlurmdbdDown", 'node_systemd_unit_state{name="slurmdbd.service",state="active"} == 0 '
             'or corral_slurm_slurmdbd_up == 0', 120, "critical",
             "slurmdbd does not answer: accounting is not recorded"),
        Rule("SlurmdDown", 'node_systemd_unit_state{name="slurmd.service",state="active"} == 0', 60, "critical",
             "slurmd is not running on {{ $labels.node }}"),
        Rule("SlurmNodeDown", 'corral_slurm_node_state{state="down"} == 1', 300, "critical",
             "Slurm marks {{ $labels.node }} down"),
        Rule("SlurmNodeDrainedByHealth", 'corral_slurm_node_drained{reason=~"corral:.*"} == 1', 0, "warning",
             "corral health drained {{ $labels.node }}: {{ $labels.reason }}"),
        Rule("GpuXidError", "DCGM_FI_DEV_XID_ERRORS != 0", 0, "critical",
             "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}"),
        Rule("GpuEccUncorrectable", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", 0, "critical",
             "GPU {{ $labels.gpu }} on {{ $labels.node }}: uncorrectable ECC errors"),
        Rule("GpuTemperatureHigh", f"DCGM_FI_DEV_GPU_TEMP > {temp}", 300, "warning",
             f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.node }}}} at {{{{ $value }}}} C (limit {temp} C)"),
        Rule("GpuCountBelowSpec", "corral_node_gpus_found < corral_node_gpus_expected", 300, "critical",
             "{{ $labels.node }} sees fewer GPUs than the spec declares ({{ $value }} found)"),
        Rule("FilesystemAlmostFull",
             f"node_filesystem_avail_bytes{{{REAL_FS}}} / node_filesystem_size_bytes{{{REAL_FS}}} * 100 < {free} "
             f"and node_filesystem_readonly{{{REAL_FS}}} == 0", 600, "warning",
             f"{{{{ $labels.mountpoint }}}} on {{{{ $labels.node }}}} has less than {free}% free"),
        Rule("FilesystemFillingUp",
             f"predict_linear(node_filesystem_avail_bytes{{{REAL_FS}}}[1h], 4 * 3600) < 0 "
             f"and node_filesystem_readonly{{{REAL_FS}}} == 0", 1800, "warning",
             "{{ $labels.mountpoint }} on {{ $labels.node }} will be full within 4 hours"),
        Rule("ClockSkew", f"abs(node_time_seconds - timestamp(node_time_seconds)) > {a.clock_skew_s}", 600,
             "warning", f"the clock of {{{{ $labels.node }}}} is more than {a.clock_skew_s} s off"),
        Rule("GpusIdleWhileJobsWait",
             'sum by (partition) (corral_slurm_partition_gpus{state="idle"}) > 0 and on (partition) '
             'sum by (partition) (corral_slurm_pending_job_gpus{reason=~"Resources|Priority"}) > 0',
             a.idle_gpus_while_waiting_min * 60, "warning",
             "partition {{ $labels.partition }}: GPUs idle while GPU jobs wait"),
    ]


def _duration(seconds: int) -> str:
    return f"{seconds // 60}m" if seconds and seconds % 60 == 0 else f"{seconds}s"


def render_rules(cluster: Cluster) -> str:
    override = cluster.spec.monitoring.alerts.for_s
    out = [f"# Managed by corral from {cluster.path.name} - do not edit", "groups:",
           "  - name: corral", "    rules:"]
    for r in rules(cluster):
        hold = r.for_s if override is None else override
        out += [f"      - alert: {r.alert}", f"        expr: {json.dumps(r.expr)}",
                f"        for: {_duration(hold)}", "        labels:", f"          severity: {r.severity}",
                f"          cluster: {json.dumps(cluster.name)}", "        annotations:",
                f"          summary: {json.dumps(r.summary)}"]
    return "\n".join(out) + "\n"
