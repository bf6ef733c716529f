"""corral-health never lifts a drain that a rollout or a removal set: every workflow's drain reason
(and its "... failed: ..." form) is one health leaves alone, and health's own reasons are not."""

from __future__ import annotations

import pytest

from corral.node.health_slurm import RESUME, ROLLOUT_PREFIX, decide
from corral.workflows import mig_rollout, removal, slurm_upgrade, upgrade_rollout

REASONS = ["corral: driver 550.127.05 rollout", "corral: driver 550.127.05 verify failed: nvidia-smi failed",
           mig_rollout.OURS, "corral: MIG apply failed: x", upgrade_rollout.OURS,
           f"{upgrade_rollout.OURS} verify failed: slurmd", slurm_upgrade.OURS, removal.REASON,
           "corral: power: resume failed"]


@pytest.mark.parametrize("reason", REASONS)
def test_rollout_drains_are_left_to_the_rollout(reason):
    assert reason.startswith(ROLLOUT_PREFIX)
    action, _, why = decide(drained(reason), [("gpu", "PASS", "ok")])
    assert action != RESUME, why


def drained(reason: str) -> dict:
    return {"state": "IDLE+DRAIN", "base": "IDLE", "flags": ["DRAIN"], "reason": reason}


def test_healths_own_drain_is_lifted_when_healthy():
    assert decide(drained("corral: gpu count 3, expected 4"), [("gpu", "PASS", "ok")])[0] == RESUME
