"""The `rollout:` section: how every change that drains or reboots a node goes through the cluster
(the NVIDIA driver, MIG layouts; workflows/batches.py carries it out).

A canary batch first (any failure there stops the rollout), then batches of `batch` nodes (a count,
or a share of the nodes to change); the rollout stops after the batch in which the failed nodes
reach `max_failed`, and the nodes after it are left untouched and in service.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from corral.spec.models_base import Strict
from corral.spec.types import Duration

_SHARE = re.compile(r"(\d{1,3})%")


def _batch(v: object) -> int | str:
    if isinstance(v, bool):
        raise PydanticCustomError("corral", "not a batch size (a node count such as 2, or a share such as 25%)")
    if isinstance(v, int) and v >= 1:
        return v
    if isinstance(v, str):
        m = _SHARE.fullmatch(v)
        if m and 1 <= int(m.group(1)) <= 100:
            return f"{int(m.group(1))}%"
        if re.fullmatch(r"\d{1,6}", v) and int(v) >= 1:
            return int(v)
    raise PydanticCustomError("corral", "not a batch size (a node count such as 2, or a share from 1% to 100%)")


BatchSize = Annotated[int | str, BeforeValidator(_batch),
                      WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1},
                                                {"type": "string", "pattern": _SHARE.pattern}]})]


class RolloutPolicy(Strict):
    """How a change that drains or reboots nodes goes through them: canary, batches, stop, roll back."""

    canary: int = Field(default=1, ge=0, le=64, description="nodes changed first, on their own; any failure "
                                                            "among them stops the rollout")
    batch: BatchSize = Field(default="25%", description="nodes per batch after the canary: a count, or a share "
                                                        "of the nodes to change (rounded up)")
    max_failed: int = Field(default=1, ge=1, le=100000, description="failed nodes that stop the rollout: no "
                                                                    "batch starts after the one that reaches it")
    pause_s: int = Field(default=0, ge=0, le=86400, description="seconds to wait between batches")
    drain_timeout: Duration = Field(default=3600, ge=0, le=7 * 86400,
                                    description="how long a drained node's running jobs may take (seconds, or "
                                                "30m, 2h); then the node is resumed unchanged (a node taken out "
                                                "of the spec stays drained, docs/operations.md)")
    reboot_timeout: Duration = Field(default=900, ge=30, le=7200,
                                     description="how long a rebooting node may take to answer with slurmd "
                                                 "running (seconds, or 15m)")
    verify_timeout: Duration = Field(default=30, ge=2, le=3600,
                                     description="after the reboot, how long the node's GPUs may take to show "
                                                 "the new driver in nvidia-smi before verification fails "
                                                 "(seconds, or 2m)")
    rollback: bool = Field(default=True, description="put a node whose verification fails back on its previous "
                                                     "version (NVIDIA driver, Debian family), verify and resume it")

    def batch_size(self, nodes: int) -> int:
        if isinstance(self.batch, int):
            return max(1, self.batch)
        return max(1, math.ceil(nodes * int(self.batch[:-1]) / 100))
