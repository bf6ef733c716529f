"""corral-health's Slurm side: `scontrol show node -o` parsing and the drain/resume decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.node import health_slurm as S

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "health"

FAILING = [("gpu_count", "FAIL", "gpu count 3 < 4"), ("mounts", "FAIL", "mount /scratch missing"),
           ("services", "OK", "active: munge, slurmd")]
PASSING = [("gpu_count", "OK", "gpu count 4"), ("gpu_ecc", "SKIPPED", "emulated GPUs"),
           ("free_space", "WARN", "free space /x: path does not exist")]


def node(name: str) -> dict:
    info = S.parse_scontrol_node((FIX / f"scontrol-node-{name}.txt").read_text())
    assert info is not None
    return info


@pytest.mark.parametrize("name,state,base,flags,reason", [
    ("idle", "IDLE", "IDLE", set(), None),
    ("mixed", "MIXED", "MIXED", set(), None),
    ("drained-corral", "IDLE+DRAIN", "IDLE", {"DRAIN"}, "corral: gpu count 3 < 4"),
    ("draining-corral", "MIXED+DRAIN", "MIXED", {"DRAIN"}, "corral: xid 79 on 0000:05:00"),
    ("drained-admin", "IDLE+DRAIN", "IDLE", {"DRAIN"}, "bad dimm, ticket 4711"),
    ("down", "DOWN+NOT_RESPONDING", "DOWN", {"NOT_RESPONDING"}, "Not responding"),
])
def test_parse_scontrol_node(name, state, base, flags, reason):
    info = node(name)
    assert (info["state"], info["base"], info["flags"], info["reason"]) == (state, base, flags, reason)


def test_parse_node_name_and_not_found():
    assert node("idle")["name"] == "cg14"
    assert S.parse_scontrol_node((FIX / "scontrol-node-not-found.txt").read_text()) is None
    assert S.parse_scontrol_node("") is None


def test_reason_with_spaces_and_brackets_keeps_its_text():
    line = ("NodeName=n1 State=DOWN+DRAIN Reason=[ops] swap PSU [x] [bob@2026-01-02T03:04:05] "
            "ReservationName=maint")
    assert S.parse_scontrol_node(line)["reason"] == "[ops] swap PSU [x]"
    line = "NodeName=n1 State=IDLE+DRAIN Reason=corral: a = b"
    assert S.parse_scontrol_node(line)["reason"] == "corral: a = b"


def test_corral_reason_is_one_bounded_line():
    assert S.corral_reason("gpu count 3 < 4") == "corral: gpu count 3 < 4"
    assert S.corral_reason("two\nlines") == "corral: two lines"
    long = S.corral_reason("x" * 500)
    assert len(long) == S.MAX_REASON and long.endswith("...")


# --- the decision -----------------------------------------------------------------------------------

def test_fail_drains_an_idle_node_with_the_first_failure():
    assert S.decide(node("idle"), FAILING)[:2] == (S.DRAIN, "corral: gpu count 3 < 4")
    assert S.decide(node("mixed"), FAILING)[:2] == (S.DRAIN, "corral: gpu count 3 < 4")


def test_fail_already_drained_by_corral_with_the_same_reason_does_nothing():
    action, reason, why = S.decide(node("drained-corral"), FAILING)
    assert (action, reason) == (S.NONE, None)
    assert "same reason" in why or "this reason" in why


def test_fail_drained_by_corral_for_another_check_updates_the_reason():
    results = [("mounts", "FAIL", "mount /scratch missing")]
    assert S.decide(node("drained-corral"), results)[:2] == (S.DRAIN, "corral: mount /scratch missing")


def test_pass_resumes_what_corral_drained():
    assert S.decide(node("drained-corral"), PASSING)[0] == S.RESUME
    assert S.decide(node("draining-corral"), PASSING)[0] == S.RESUME


def test_pass_never_resumes_an_admin_drain():
    action, _, why = S.decide(node("drained-admin"), PASSING)
    assert action == S.NONE
    assert "bad dimm" in why


def test_fail_keeps_the_admins_reason():
    action, reason, why = S.decide(node("drained-admin"), FAILING)
    assert (action, reason) == (S.NONE, None)
    assert "bad dimm" in why


def test_down_node_is_slurms_business():
    assert S.decide(node("down"), PASSING)[0] == S.NONE
    assert S.decide(node("down"), FAILING)[0] == S.NONE


def test_pass_on_a_healthy_node_does_nothing():
    assert S.decide(node("idle"), PASSING) == (S.NONE, None, "healthy")


def test_warn_and_skipped_do_not_drain():
    results = [("gpu_temp", "WARN", "nvidia-smi exited 2"), ("gpu_ecc", "SKIPPED", "no data")]
    assert S.decide(node("idle"), results)[0] == S.NONE


def test_health_never_resumes_a_drain_of_the_driver_rollout():
    from corral.node.health_slurm import RESUME, decide
    for reason in ("corral: driver 550.127.05 rollout", "corral: driver 1.2 verify failed: nvidia-smi failed"):
        node = {"name": "gpu01", "state": "IDLE+DRAIN", "base": "IDLE", "flags": {"DRAIN"}, "reason": reason}
        action, _, why = decide(node, [("gpu_count", "OK", "gpu count 4")])
        assert action != RESUME and "not corral's to resume" in why
