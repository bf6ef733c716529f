"""The `workbench:` section: notebooks for researchers (deploy/jupyterhub.py, docs/components/notebooks.md).

`workbench.jupyterhub:` runs JupyterHub on a login node, served over HTTPS, its users authenticated
through PAM (local accounts and SSSD/LDAP users alike); each user's JupyterLab runs as that user inside a
Slurm job on a compute node (batchspawner's SlurmSpawner), asked for through a form whose choices come
from the spec (partitions, GPU models and MIG profiles) and are bounded by the user's QOS. Hub, proxy,
spawner and JupyterLab come from pinned, hash-checked wheels (render/files/jupyter-*.txt) installed once
into a venv on the software root (shared /sw). Cross-field checks: spec/rules_workbench.py.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from corral.spec.models_base import Strict
from corral.spec.types import AbsPath, Duration, Hostname, SlurmName, UnixUser


GresType = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]


class TlsFiles(Strict):
    """A site certificate for the hub: files on the control host, read at apply and pushed (key 0600)."""

    cert: AbsPath = Field(description="PEM certificate chain on the control host (the server's first)")
    key: AbsPath = Field(description="PEM private key on the control host (0600 or 0400, not world-readable)")


class JupyterHubSpec(Strict):
    """JupyterHub on a login node with servers as Slurm jobs."""

    node: Hostname | None = Field(default=None, description="the login node the hub runs on; unset: the first "
                                                           "login node")
    port: int = Field(default=8443, ge=1, le=65535, description="the HTTPS port users open in their browser")
    tls: TlsFiles | None = Field(default=None, description="the site's certificate; unset: one signed by the "
                                                           "cluster CA corral makes (its certificate: "
                                                           "STATE_DIR/secrets/ca/ca.pem, to import in browsers)")
    names: list[Hostname] = Field(default_factory=list, max_length=16,
                                  description="more host names users reach the hub by (put in the certificate "
                                              "corral makes; the node's name and cluster address always are)")
    partitions: list[SlurmName] = Field(default_factory=list, max_length=32,
                                        description="the partitions the form offers (of slurm.partitions); "
                                                    "empty: all of them")
    gpu_types: list[GresType] = Field(default_factory=list, max_length=32,
                                            description="the GPU types the form offers: GPU models of the nodes "
                                                        "(h100) and MIG profiles (1g.10gb) of the partitions; "
                                                        "empty: all of them")
    max_gpus: int = Field(default=8, ge=0, le=64, description="the most GPUs the form lets a server ask for "
                                                             "(further bounded by the node's GPUs and the QOS)")
    max_cpus: int = Field(default=16, ge=1, le=1024, description="the most CPUs the form offers")
    max_memory_gb: int = Field(default=64, ge=1, le=4096, description="the most memory (GB) the form offers")
    default_time: Duration = Field(default=7200, ge=60, le=365 * 86400,
                                   description="the time limit the form starts with (e.g. 2h)")
    max_time: Duration = Field(default=28800, ge=60, le=365 * 86400,
                               description="the longest time limit the form accepts (e.g. 8h; the partition's "
                                           "MaxTime and the QOS's MaxWall still apply)")
    idle_timeout: Duration = Field(default=3600, ge=300, le=7 * 86400,
                                   description="a server idle this long is stopped and its job ends "
                                               "(jupyterhub-idle-culler); e.g. 1h")
    admins: list[UnixUser] = Field(default_factory=list, max_length=32,
                                    description="users who are hub admins (may see and stop others' servers)")


class WorkbenchSpec(Strict):
    """Interactive work for the cluster's users."""

    jupyterhub: JupyterHubSpec | None = Field(default=None, description="JupyterHub with servers as Slurm jobs "
                                                                        "(needs software: for the venv on /sw); "
                                                                        "unset: none")
