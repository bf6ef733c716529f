"""dcgm_exporter: NVIDIA dcgm-exporter on GPU compute nodes (real clusters), from NVIDIA's CUDA
repository, its version pinned (apt preferences), run by corral's own unit with corral's field
list (ECC, XID, throttling, NVLink, power) and the GPU job-mapping directory the Slurm
prolog/epilog keep (deploy/jobhooks.py), so GPU metrics carry the job id (label hpc_job).
Skipped, with the reason in the plan, where there is nothing for it to read (render/prometheus.py:
dcgm_skip_reason), e.g. the virtual cluster's emulated GPUs."""

from __future__ import annotations

from importlib import resources

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.monitoring import http_ready
from corral.deploy.nodestate import Want, register
from corral.deploy.nvidia_repo import cuda_repository
from corral.engine.conditions import AnyChanged
from corral.render.prometheus import dcgm_skip_reason, listen_address
from corral.render.restart import service_lines, unit_lines
from corral import paths

UNIT = "corral-dcgm-exporter"
UNIT_FILE = f"/etc/systemd/system/{UNIT}.service"
FIELDS = paths.DCGM_FIELDS
PIN = "/etc/apt/preferences.d/corral-dcgm-exporter"
WANT = register(Want(paths=(UNIT_FILE, FIELDS, PIN), services=(UNIT,),
                     packages=("cuda-keyring", "datacenter-gpu-manager-exporter")))


def pin(package: str, version: str | None) -> str:
    if version is None:
        return f"# Managed by corral: {package} is not pinned (monitoring.dcgm_exporter.version unset)\n"
    return (f"# Managed by corral: an unrelated upgrade never moves {package}\n"
            f"Package: {package}\nPin: version {version}\nPin-Priority: 1001\n")


def fields_text() -> str:
    """corral's field list for dcgm-exporter (render/files/dcgm-fields.csv), installed as it is."""
    return resources.files("corral.render").joinpath("files/dcgm-fields.csv").read_text()


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


@deploy("dcgm exporter")
def dcgm_exporter() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    m = cluster.spec.monitoring
    if not m.enabled or not cluster.with_role("monitoring") or "compute" not in node.roles:
        return
    reason = dcgm_skip_reason(cluster, node)
    if reason:
        operations.skip(name="dcgm-exporter (GPU metrics)", reason=reason)
        return
    d = m.dcgm_exporter
    cuda_repository(name="NVIDIA CUDA repository", repo_url=d.repo_url, want=WANT)
    operations.managed_file(name="dcgm-exporter version pin", path=PIN, want=WANT, content=pin(d.package, d.version))
    operations.packages(name="dcgm-exporter installed", names=[f"{d.package}={d.version}" if d.version else d.package],
                 want=WANT)
    fields = operations.managed_file(name="dcgm-exporter fields", path=FIELDS, want=WANT, disruption=f"restart {UNIT}",
                              content=fields_text())
    unit_file = operations.managed_file(name=UNIT_FILE, path=UNIT_FILE, want=WANT, disruption=f"restart {UNIT}",
                                 content=unit(d.binary, listen_address(cluster, node.address, d.port),
                                              m.gpu_job_map_dir))
    ready = http_ready(node.address, d.port, "/metrics")
    operations.service(name="dcgm-exporter running", unit=UNIT, want=WANT, wait=ready)
    operations.restart(name="dcgm-exporter restarted (fields or unit changed)", unit=UNIT, want=WANT, wait=ready,
                _if=AnyChanged(fields, unit_file))
