"""MIG without a node: spec layouts and their checks, the `nvidia-smi mig -lci` and mig-minors
parsers on captured outputs, what Slurm gets (gres.conf MultipleFiles=, slurm.conf Gres=), the
mig-parted config, the rollout's steps against a stand-in node, and corral-health's MIG count. The
operation (facts in -> no-op or a rollout change) is tested by its cases in tests/operations/mig_layout/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.errors import SpecError
from corral.facts.mig import by_gpu, minors_table, mig_devices, parse_compute_instances, parse_minors
from corral.facts.slurm import hw_from_json, hw_to_json
from corral.node import health_checks as C
from corral.node import health_parse as P
from corral.render.gres import render_gres_conf
from corral.facts.records import NodeHW
from corral.render.mig import differences, mig_parted_config, node_gres
from corral.render.slurm import render_slurm_conf
from corral.spec.loader import load_text

FIX = Path(__file__).parent.parent / "fixtures" / "gpu" / "mig"
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - names: gpu01
    addresses: [10.0.0.11]
    roles: [compute]
    gpus:
      model: a100
      count: 4
      mig:
        - {gpus: "0", profiles: [3g.40gb, 4g.40gb]}
        - {gpus: "1-2", profiles: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]}
nvidia: {mig_parted: {sha256: {nvidia-mig-manager: %s}}}
""" % ("a" * 64)


def test_captured_compute_instances_parse_with_and_without_placement():
    assert parse_compute_instances((FIX / "a100-40gb-lci-placement.txt").read_text()) == [
        (0, 9, "1g.5gb", 0), (0, 3, "1c.2g.10gb", 0), (0, 3, "1c.2g.10gb", 1), (0, 2, "4g.20gb", 0)]
    assert parse_compute_instances((FIX / "a100-lci-no-placement.txt").read_text()) == [
        (0, 1, "1c.3g.20gb", 0), (0, 1, "1c.3g.20gb", 1), (0, 1, "1c.3g.20gb", 2)]
    assert parse_compute_instances((FIX / "a100-80gb-lci-two-gis.txt").read_text()) == [
        (0, 1, "3g.40gb", 0), (0, 5, "4g.40gb", 0)]
    assert parse_compute_instances("No MIG-enabled devices found.") == []


def test_devices_get_their_access_files_from_mig_minors():
    minors = minors_table(2)
    table = parse_minors(minors)
    assert table["config"] == 1 and table["gpu0/gi0/access"] == 3 and table["gpu0/gi1/access"] == 12
    assert table["gpu1/gi0/access"] == 3 + 15 * 9 and table["gpu0/gi1/ci0/access"] == 13
    devices = mig_devices((FIX / "a100-80gb-lci-two-gis.txt").read_text(), minors)
    assert [d.files() for d in devices] == [
        "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13",
        "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap48,/dev/nvidia-caps/nvidia-cap49"]
    assert mig_devices((FIX / "a100-80gb-lci-two-gis.txt").read_text(), "") == ()  # no minors: not constrainable
    assert by_gpu(devices) == {0: ["4g.40gb", "3g.40gb"]}


def facts(layout_text: str, gpus: int = 4) -> NodeHW:
    return NodeHW(16, 1, 16, 1, 64000, mig=mig_devices(layout_text, minors_table(gpus)))


LCI_SPEC = "\n".join(  # the spec's layout, as the emulated nvidia-smi (and a driver) prints it
    [f"|   0      {gi}       MIG {p}          0         0          0:1     |" for gi, p in ((1, "4g.40gb"), (2, "3g.40gb"))]
    + [f"|   {g}      {i + 1}       MIG 1g.10gb          0         0          0:1     |" for g in (1, 2) for i in range(7)])


def test_slurm_describes_the_devices_the_node_has():
    c = load_text(SPEC, "cluster.yaml")
    node, hw = c.node("gpu01"), {"gpu01": facts(LCI_SPEC)}
    assert node_gres("a100", 4, hw["gpu01"]) == [("a100", 1), ("4g.40gb", 1), ("3g.40gb", 1), ("1g.10gb", 14)]
    conf = render_gres_conf(c, hw)
    assert "NodeName=gpu01 Name=gpu Type=a100 File=/dev/nvidia3\n" in conf
    assert "NodeName=gpu01 Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia2,/dev/nvidia-caps/nvidia-cap" in conf
    assert conf.count("Type=1g.10gb") == 14 and "File=/dev/nvidia0" not in conf
    slurm = render_slurm_conf(c, hw)
    assert "Gres=gpu:a100:1,gpu:4g.40gb:1,gpu:3g.40gb:1,gpu:1g.10gb:14" in slurm
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:1g.10gb,gres/gpu:3g.40gb,gres/gpu:4g.40gb,gres/gpu:a100" in slurm
    before = render_slurm_conf(c, {})  # not applied yet: whole GPUs, the same TRES (no restart later)
    assert "Gres=gpu:a100:4" in before and "gres/gpu:1g.10gb" in before


def test_differences_and_the_mig_parted_config():
    c = load_text(SPEC, "cluster.yaml")
    gpus = c.node("gpu01").gpus
    assert differences(gpus, facts(LCI_SPEC)) == []
    assert differences(gpus, None) == ["GPU 0: whole -> 4g.40gb+3g.40gb", "GPU 1: whole -> " + "+".join(["1g.10gb"] * 7),
                                       "GPU 2: whole -> " + "+".join(["1g.10gb"] * 7)]
    config = json.loads(mig_parted_config(gpus))["mig-configs"]["corral"]
    assert config == [{"devices": [0], "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "3g.40gb": 1}},
                      {"devices": [1, 2], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                      {"devices": [3], "mig-enabled": False}]


@pytest.mark.parametrize("mig,message", [
    ('[{gpus: "0", profiles: [4g.40gb, 4g.40gb]}]', "MIG profiles use 8 compute slices, a a100 GPU has 7"),
    ('[{gpus: "0-4", profiles: [7g.80gb]}]', "GPU 4 does not exist (the node has 4: 0-3)"),
    ('[{profiles: [1g.5gb]}]', "1g.5gb is not a MIG profile of a100"),
    ('[{gpus: "0", profiles: [7g.80gb]}, {gpus: "0", profiles: []}]', "GPU 0 is in MIG entries 0 and 1"),
    ('[{profiles: [big]}]', "'big' is not a MIG profile name"),
])
def test_layout_errors_name_the_node_and_the_problem(mig, message):
    text = SPEC.split("      mig:")[0] + f"      mig: {mig}\n"
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_text(text, "cluster.yaml")


def test_hardware_cache_keeps_mig_devices_and_reads_old_caches():
    hw = facts(LCI_SPEC)
    assert hw_from_json(json.loads(json.dumps(hw_to_json(hw)))) == hw
    old = hw_to_json(NodeHW(16, 1, 16, 1, 64000))
    assert "mig" not in old and hw_from_json(old).mig == ()
    with pytest.raises(ValueError, match="mig: expected a list"):
        hw_from_json({**old, "mig": [{"gpu": 0}]})


def test_health_counts_mig_devices():
    listing = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-8f2c1d90)\n"
               "  MIG 3g.40gb  Device  0: (UUID: MIG-b6ba6b2a-1cd4-5f1e-8a03-77d19e02c4b1)\n"
               "  MIG 4g.40gb  Device  1: (UUID: MIG-0f2e)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n")
    assert P.parse_mig_list(listing) == {"3g.40gb": 1, "4g.40gb": 1}
    probe = C.Probe("gpu-list", ["nvidia-smi", "-L"])
    probe.out, probe.rc = listing, 0
    assert C.check_mig({"expected_mig": {"3g.40gb": 1, "4g.40gb": 1}}, probe) == (C.OK, "MIG devices 3g.40gb x1, 4g.40gb x1")
    status, message = C.check_mig({"expected_mig": {"1g.10gb": 7}}, probe)
    assert status == C.FAIL and message == "MIG devices 3g.40gb x1, 4g.40gb x1, expected 1g.10gb x7"


from corral.workflows.slurm_node import SlurmControl  # noqa: E402


class FakeRollout(SlurmControl):
    """The Slurm and SSH side of a rollout, scripted: records drains and resumes (the real drain,
    wait and settle sequence over the scripted asks); `on` is the run seam."""

    def __init__(self, cluster, apply_rc=0, lci=LCI_SPEC, jobs_stuck=False):
        from corral.spec.rules_rollout import policy
        super().__init__("ctl", self.on, policy(cluster.spec))
        self.cluster, self.reason = cluster, ""
        self.apply_rc, self.lci, self.jobs_stuck, self.log = apply_rc, lci, jobs_stuck, []

    def say(self, line):
        self.log.append(line)

    def node_reason(self, node):
        return self.reason

    def drain(self, node, reason):
        self.reason = reason
        self.log.append(f"drain {reason}")

    def resume(self, node):
        self.reason = ""
        self.log.append("resume")

    def wait_for_jobs(self, node):
        from corral.workflows.node_control import StepFailed
        if self.jobs_stuck:
            raise StepFailed("wait for jobs", "1 job(s) still running", keep_drained=False)

    def on(self, node, command, timeout=60, check=False):
        import subprocess
        if "nvidia-mig-parted apply" in command:
            return subprocess.CompletedProcess(command, self.apply_rc, "", "Error: the GPU is in use")
        return subprocess.CompletedProcess(command, 0, "@@mig-lci\n" + self.lci + "\n@@mig-minors\n" + minors_table(4), "")


def reconfigure(fake, name):
    from corral.workflows.mig_rollout import MIG
    from corral.workflows.node_rollout import Env, Rollout
    return Rollout(MIG, fake.cluster, Env(run=fake.on, say=fake.say), control=fake).one(name)


def test_rollout_steps_and_what_a_failure_leaves():
    from corral.workflows.mig_rollout import OURS
    c = load_text(SPEC, "cluster.yaml")
    ok = FakeRollout(c)
    ops, error = reconfigure(ok, "gpu01")
    assert error is None and [o.name.split(" | ")[1] for o in ops] == ["drain", "wait for jobs", "apply", "verify"]
    assert ok.reason == OURS  # still drained: Slurm must follow the new devices before the resume
    failed = FakeRollout(c, apply_rc=1)
    ops, error = reconfigure(failed, "gpu01")
    assert "apply failed: nvidia-mig-parted: Error: the GPU is in use (left drained)" in error
    assert failed.reason.startswith("corral: MIG apply failed")
    wrong = FakeRollout(c, lci="")
    _, error = reconfigure(wrong, "gpu01")
    assert "verify failed: MIG devices {} after the apply" in error and wrong.reason.startswith("corral: MIG verify")
    busy = FakeRollout(c, jobs_stuck=True)
    _, error = reconfigure(busy, "gpu01")
    assert "(resumed unchanged)" in error and busy.reason == "" and busy.log[-2] == "resume"


def test_validate_expects_the_layouts_gres_and_asks_whole_gpus_or_one_mig_device():
    from corral.checks.jobs import gpu_request
    from corral.spec.mig import spec_gres
    c = load_text(SPEC, "cluster.yaml")
    n = c.node("gpu01")
    assert spec_gres(n.gpus) == {"a100": 1, "4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 14}
    assert gpu_request(n) == ("gpu:a100:1", 1, False)
    split = load_text(SPEC.replace('gpus: "0", profiles', 'gpus: "0,3", profiles'), "cluster.yaml").node("gpu01")
    assert gpu_request(split) == ("gpu:1g.10gb:1", 1, True)
    plain = load_text(SPEC.split("      mig:")[0], "cluster.yaml").node("gpu01")
    assert spec_gres(plain.gpus) == {"a100": 4} and gpu_request(plain) == ("gpu:4", 4, False)
