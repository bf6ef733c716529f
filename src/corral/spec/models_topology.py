"""The `topology:` section: the network between the compute nodes, for Slurm's topology-aware scheduling
(topology.conf; docs/components/fabric.md). Either switches (topology/tree: leaf switches with their
nodes, higher switches with their child switches) or blocks (topology/block, Slurm >= 23.11: NVLink
domains such as a GB200 NVL72 rack). Rules in spec/rules_topology.py, rendering in render/topology.py."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from corral.spec.models_base import LOCAL_PATH, Strict
from corral.spec.models_slurm import HOSTLIST
from corral.spec.types import ConfigWord, SlurmName


class Switch(Strict):
    """One switch: a leaf with its `nodes`, or a higher switch with its child `switches` (or both)."""

    name: SlurmName = Field(description="the switch's name in topology.conf (SwitchName=)")
    nodes: str | None = Field(default=None, pattern=HOSTLIST, description="hostlist of the compute nodes cabled to it, e.g. gpu[01-16]")
    switches: list[SlurmName] = Field(default=[], description="its child switches (names of other switches here)")

    @model_validator(mode="after")
    def _children(self):
        if self.nodes is None and not self.switches:
            raise ValueError(f"switch {self.name!r} has neither nodes nor switches: give its nodes (a leaf) or its "
                             "child switches")
        return self


class Block(Strict):
    """One block of nodes with a fast interconnect of their own (an NVLink domain)."""

    name: SlurmName = Field(description="the block's name in topology.conf (BlockName=)")
    nodes: str = Field(pattern=HOSTLIST, description="hostlist of its compute nodes")


class TopologySpec(Strict):
    """Declared network topology; unset: no topology plugin (every node is as near as any other)."""

    switches: list[Switch] = Field(default=[], description="topology/tree: every switch, leaves and above")
    blocks: list[Block] = Field(default=[], description="topology/block (Slurm >= 23.11): NVLink domains")
    discover: Literal["infiniband"] | None = Field(
        default=None, description="topology/tree from the fabric: plan and apply run ibnetdiscover "
                                  "(infiniband-diags) on a compute node, and on one more per fabric it did not "
                                  "reach; the last result is kept in the state dir")
    ibnetdiscover_file: str | None = Field(
        default=None, pattern=LOCAL_PATH, description="with discover: a saved `ibnetdiscover` output to read instead of running it "
                                  "(relative to the spec file)")

    route: bool = Field(default=False, description="route slurmd's messages along the switch tree (RoutePlugin="
                                                   "route/topology; TopologyParam=RouteTree from Slurm 23.11): for "
                                                   "large clusters; needs switches under one top")

    @model_validator(mode="after")
    def _one_kind(self):
        given = [k for k in ("switches", "blocks", "discover") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one of switches (topology/tree), blocks (topology/block) or discover, not "
                             f"{' and '.join(given)}")
        if not given:
            raise ValueError("give switches (topology/tree), blocks (topology/block) or discover: infiniband")
        if self.ibnetdiscover_file and not self.discover:
            raise ValueError("ibnetdiscover_file is read with discover: infiniband only")
        return self

    @property
    def plugin(self) -> str:
        return "topology/block" if self.blocks else "topology/tree"


# the communication libraries' variables only: the job environment is no way to set LD_PRELOAD or PATH
ENV_PREFIXES = ("NCCL", "UCX", "UCC", "OMPI", "PMIX", "SHARP", "NVSHMEM", "FI", "HCOLL", "GLOO", "TORCH_NCCL",
                "CUDA", "MLX5")
ENV_KEY = rf"({'|'.join(ENV_PREFIXES)})_[A-Z0-9_]{{1,60}}"
# ... and of those, none that makes a library load code: a plugin, an injection library, a component or
# module directory (CUDA_INJECTION64_PATH, NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN, OMPI_MCA_mca_base_component_path
# upper-cased, UCX_MODULE_DIR, FI_PROVIDER_PATH, ...). Exported into every job of every user, such a path
# would run whatever is there in all of them; names ending in _PATH or _DIR are refused for the same reason.
CODE_LOADING = re.compile(r".*(PLUGIN|INJECTION|PRELOAD|_LIBS?|_LIBRARY|_PATH|_DIRS?)(_[A-Z0-9_]*)?")


def env_refusal(key: str) -> str | None:
    """Why `key` may not be in the job environment (None: it may)."""
    if not re.fullmatch(ENV_KEY, key):
        return (f"{key[:80]!r} is not a communication library's variable: the job environment sets only "
                f"{', '.join(f'{p}_*' for p in ENV_PREFIXES)} (upper case)")
    if CODE_LOADING.fullmatch(key):
        return (f"{key!r} makes a library load code (a plugin, injection library, component or module path): "
                "exported into every user's job it would run whatever is at that path; install the plugin "
                "where the library finds it by default, or set it in the jobs that want it")
    return None


class FabricSpec(Strict):
    """The job environment corral derives from each compute node's fabric facts (render/job_env.py:
    NCCL_IB_HCA, UCX_NET_DEVICES, NCCL_IB_GID_INDEX for RoCE, NCCL_SOCKET_IFNAME), exported into every task by
    corral's TaskProlog unless the job sets the variable."""

    job_env: bool = Field(default=True, description="install the derived environment and the TaskProlog that "
                                                    "exports it on compute nodes (with pyxis: corral's SPANK "
                                                    "plugin, [components/containers.md](components/containers.md))")
    env: dict[str, ConfigWord | Literal[""]] = Field(
        default={}, description="variables over the derived ones, e.g. NCCL_TOPO_FILE: /etc/nccl/topo.xml, "
                                "NCCL_IB_GID_INDEX: '3'; an empty value drops a derived one. Only the "
                                "communication libraries' variables: " + ", ".join(f"{p}_*" for p in ENV_PREFIXES))

    @field_validator("env")
    @classmethod
    def _env_keys(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if why := env_refusal(key):
                raise ValueError(why)
        return v
    ib_write_bw_floor_gbps: float | None = Field(default=None, gt=0, le=10000,
                                                 description="`corral validate --fabric`: the least ib_write_bw "
                                                             "average per node pair, Gb/s; unset: 80 % of the slower "
                                                             "port's link rate")
    max_pairs: int = Field(default=16, ge=1, le=1024, description="`validate --fabric`: at most this many node "
                                                                  "pairs (within each leaf, then across)")
