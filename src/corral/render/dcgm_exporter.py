"""dcgm-exporter, declared as data (components/slurm.py): NVIDIA dcgm-exporter on GPU compute nodes (real clusters),
from NVIDIA's CUDA repository, its version pinned (apt preferences), run by corral's own unit with corral's field list
(ECC, XID, throttling, NVLink, power) and the GPU job-mapping directory the Slurm prolog/epilog keep (deploy/jobhooks.py),
so GPU metrics carry the job id (label hpc_job). Skipped, with the reason in the plan, where there is nothing for it
to read (render/prometheus.py: dcgm_skip_reason), e.g. the virtual cluster's emulated GPUs."""

from __future__ import annotations

from importlib import resources as package_files

from corral import paths
from corral.render import resources as r
from corral.render.prometheus import dcgm_skip_reason, listen_address, listens_on
from corral.render.ready import http_ready
from corral.render.restart import service_lines, unit_lines

UNIT = "corral-dcgm-exporter"
UNIT_FILE = f"/etc/systemd/system/{UNIT}.service"
FIELDS = paths.DCGM_FIELDS
PIN = "/etc/apt/preferences.d/corral-dcgm-exporter"


def pin(package: str, version: str | None) -> str:
    if version is None:
        return f"# Managed by corral: {package} is not pinned (monitoring.dcgm_exporter.version unset)\n"
    return (f"# Managed by corral: an unrelated upgrade never moves {package}\n"
            f"Package: {package}\nPin: version {version}\nPin-Priority: 1001\n")


def fields_text() -> str:
    """corral's field list for dcgm-exporter (render/files/dcgm-fields.csv), installed as it is."""
    return package_files.files("corral.render").joinpath("files/dcgm-fields.csv").read_text()


def unit(binary: str, listen: str, job_map_dir: str) -> str:
    """corral's own unit: its restart policy (render/restart.py) is part of it."""
    start_limit, restart = "\n".join(unit_lines(UNIT)), "\n".join(service_lines(UNIT))
    return f"""# Managed by corral
[Unit]
Description=NVIDIA dcgm-exporter (corral: field list and GPU job mapping)
After=nvidia-persistenced.service
{start_limit}

[Service]
ExecStartPre=/bin/mkdir -p {job_map_dir}
ExecStart={binary} --address {listen} --collectors {FIELDS} --hpc-job-mapping-dir {job_map_dir}
{restart}

[Install]
WantedBy=multi-user.target
"""


def applies(cluster, node) -> bool:
    """Compute nodes of a cluster with monitoring (where a GPU node's metrics go)."""
    m = cluster.spec.monitoring
    return m.enabled and bool(cluster.with_role("monitoring")) and "compute" in node.roles


def resources(cluster, node) -> list:
    reason = dcgm_skip_reason(cluster, node)
    if reason:
        return [r.Skip("dcgm-exporter (GPU metrics)", reason, noted=reason != "no GPUs on this node",
                       what="dcgm-exporter")]
    m = cluster.spec.monitoring
    d = m.dcgm_exporter
    restart, ready = f"restart {UNIT}", http_ready(node.address, d.port, "/metrics")
    return [
        r.Repository("NVIDIA CUDA repository", "cuda", d.repo_url),
        r.File(PIN, pin(d.package, d.version), "dcgm-exporter version pin"),
        r.Packages((f"{d.package}={d.version}" if d.version else d.package,), "dcgm-exporter installed",
                   "monitoring.dcgm_exporter", vendor=True, together=False),
        r.File(FIELDS, fields_text(), "dcgm-exporter fields", disruption=restart),
        r.File(UNIT_FILE, unit(d.binary, listen_address(cluster, node.address, d.port), m.gpu_job_map_dir),
               disruption=restart),
        r.Service(UNIT, "dcgm-exporter running", ready, "dcgm-exporter restarted (fields or unit changed)",
                  (FIELDS, UNIT_FILE),
                  runs=r.Daemon(f"{UNIT}.service", "root", "dcgm-exporter reads every GPU through DCGM",
                                root=("dcgm-exporter",), listens=(r.Listener(d.port, "Prometheus", on=listens_on(cluster)),))),
    ]
