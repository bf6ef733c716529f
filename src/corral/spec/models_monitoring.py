"""The `monitoring:` section of the spec: Prometheus, Alertmanager, Grafana, the exporters
(render/prometheus.py, alerts.py, alertmanager.py, grafana.py; render/monitoring.py, render/dcgm_exporter.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from corral.spec.models_base import Strict
from corral.spec.models_slurm import NAME
from corral.spec.types import AbsPath, Email, Fingerprint, HostPort, Url

PORT = {"ge": 1, "le": 65535}
APT_VERSION = r"^[0-9A-Za-z.+~:-]+$"
PACKAGE = r"^[a-z0-9][a-z0-9.+-]+$"


class AlertReceiver(Strict):
    """Where Alertmanager sends alerts: a webhook URL or an e-mail address (needs alerts.smtp)."""

    name: str = Field(pattern=NAME, description="receiver name in alertmanager.yml")
    webhook: Url | None = Field(default=None, description="URL Alertmanager posts the alerts to "
                                                          "(webhook_configs)")
    email: Email | None = Field(default=None, description="address Alertmanager mails the alerts to "
                                                          "(email_configs; needs alerts.smtp)")
    severities: list[Literal["critical", "warning"]] = Field(default_factory=lambda: ["critical", "warning"],
                                                             min_length=1,
                                                             description="the alerts it gets, by severity")

    @model_validator(mode="after")
    def _one_target(self):
        if (self.webhook is None) == (self.email is None):
            raise ValueError("a receiver needs exactly one of `webhook` (URL) or `email` (address)")
        return self


class SmtpSpec(Strict):
    """The mail server Alertmanager sends e-mail through (global smtp_* in alertmanager.yml)."""

    smarthost: HostPort = Field(description="smtp_smarthost: the mail server's host:port")
    sender: Email = Field(description="smtp_from: the From address")
    require_tls: bool = Field(default=True, description="smtp_require_tls")


class AlertsSpec(Strict):
    """Alert rules (Prometheus rule files) and Alertmanager routing."""

    receivers: list[AlertReceiver] = Field(default_factory=list,
                                           description="where alerts go; none: alerts are only shown in "
                                                       "Alertmanager")
    smtp: SmtpSpec | None = Field(default=None, description="mail server for e-mail receivers")
    for_s: int | None = Field(default=None, ge=0, le=86400,
                              description="overrides every rule's `for:`, seconds (test profiles)")
    filesystem_free_percent: int = Field(default=10, ge=1, le=90,
                                         description="FilesystemAlmostFull fires below this free share of "
                                                     "a filesystem, percent")
    clock_skew_s: float = Field(default=0.5, gt=0, le=60,
                                description="ClockSkew fires when a node's clock is off by more, seconds")
    idle_gpus_while_waiting_min: int = Field(default=15, ge=1, le=1440,
                                             description="GpusIdleWhileJobsWait fires after GPUs sit idle this "
                                                         "long while GPU jobs wait, minutes")


class GrafanaSpec(Strict):
    """Grafana from Grafana's package repository (not installable in the offline virtual cluster)."""

    enabled: bool = Field(default=True, description="install Grafana on the monitoring node")
    port: int = Field(default=3000, **PORT, description="http_port in grafana.ini")
    repo_url: Url = Field(default="https://apt.grafana.com", description="Grafana's apt repository")
    key_url: Url = Field(default="https://apt.grafana.com/gpg.key", description="the repository's signing key")
    key_fingerprint: Fingerprint | None = Field(default=None, pattern=r"^[0-9A-Fa-f]{40}$",
                                        description="the 40-hex-digit fingerprint key_url must hold (a site's "
                                                    "re-signed mirror); unset: Grafana's "
                                                    "B53AE77BADB630A683046005963FA27710458545")
    version: str | None = Field(default=None, pattern=APT_VERSION,
                                description="apt version, pinned; unset: the newest")


class DcgmExporterSpec(Strict):
    """NVIDIA dcgm-exporter on GPU nodes (from NVIDIA's CUDA repository; needs DCGM, so not on
    the virtual cluster's emulated GPUs)."""

    enabled: bool = Field(default=True, description="run dcgm-exporter on GPU compute nodes")
    port: int = Field(default=9400, **PORT, description="dcgm-exporter's listen port (Prometheus job dcgm)")
    package: str = Field(default="datacenter-gpu-manager-exporter", pattern=PACKAGE,
                         description="the apt package")
    version: str | None = Field(default=None, pattern=APT_VERSION,
                                description="apt version, pinned; unset: the newest")
    binary: AbsPath = Field(default="/usr/bin/dcgm-exporter", description="the program its systemd unit runs")
    repo_url: Url = Field(default="https://developer.download.nvidia.com/compute/cuda/repos",
                          description="NVIDIA's CUDA repository (used when nvidia.driver is unset)")


class MonitoringSpec(Strict):
    """Prometheus + Alertmanager (+ Grafana) on the `monitoring` node, node-exporter on every node,
    corral's Slurm exporter on the controller, dcgm-exporter on GPU nodes."""

    enabled: bool = Field(default=True, description="deploy the monitoring stack")
    prometheus_port: int = Field(default=9090, **PORT, description="Prometheus's port (monitoring node)")
    alertmanager_port: int = Field(default=9093, **PORT, description="Alertmanager's port (monitoring node)")
    node_exporter_port: int = Field(default=9100, **PORT,
                                    description="node-exporter's --web.listen-address port (every node)")
    slurm_exporter_port: int = Field(default=9341, **PORT,
                                     description="corral's Slurm exporter's port (controller)")
    scrape_interval_s: int = Field(default=15, ge=1, le=3600,
                                   description="Prometheus scrape_interval and evaluation_interval, seconds")
    retention_days: int = Field(default=15, ge=1, le=3650,
                                description="Prometheus --storage.tsdb.retention.time, days")
    listen: Literal["node", "all"] = Field(default="node",
                                           description="node: bind the node's cluster address; all: 0.0.0.0")
    gpu_job_map_dir: AbsPath = Field(default="/run/corral/gpu-jobs",
                                     description="where the prolog records which jobs use each GPU "
                                                 "(dcgm-exporter's job labels)")
    alerts: AlertsSpec = Field(default=AlertsSpec(), description="alert rules and routing")
    grafana: GrafanaSpec = Field(default=GrafanaSpec(), description="Grafana")
    dcgm_exporter: DcgmExporterSpec = Field(default=DcgmExporterSpec(), description="dcgm-exporter")
