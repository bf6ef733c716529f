"""MIG on a real virtual cluster (GPU hardware emulated: a stand-in nvidia-mig-parted and nvidia-smi,
/dev/nvidia-caps devices, the driver's mig-minors table; see corral/virtual/gpu.py). Everything else
is real: apply's rollout drains the node, applies the layout, Slurm's gres.conf/slurm.conf follow the
node's MIG devices (MultipleFiles=), slurmd restarts, the node is resumed and jobs get MIG devices;
corral-health counts them; a reboot brings the layout back before slurmd; a new layout shows in plan.
gpu01 has the layout; gpu02 gets one only for the first apply, `--rollout-only gpu01`, which must leave it
as it is (issue 54); after that it is a GPU node without MIG (so no second node's rollout in later tests)."""

from __future__ import annotations

import json
import time

import pytest

from corral.cli.main import main
from corral.engine import journal
from corral.workflows.converge import converge
from corral.spec.loader import load
from corral.workflows.node_rollout import REBOOT_SOON
from tests.vcluster.conftest import make_spec, ssh, vcluster_unavailable

pytestmark = pytest.mark.vcluster
GPUS = "    gpus: {model: h100, count: 4}\n"
FIRST = "3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb"


def layout(profiles: str, nodes=("gpu01",)) -> str:
    """The group's GPUs, and a MIG layout on GPUs 0-1 of `nodes` (per-node overrides)."""
    mig = f'{{gpus: {{mig: [{{gpus: "0-1", profiles: [{profiles}]}}]}}}}'
    return GPUS + "    overrides:\n" + "".join(f"      {n}: {mig}\n" for n in nodes)


def gres(vc, wait_s: float = 20) -> str:
    """'idle gpu:1g.10gb:4,gpu:h100:2' (sorted; socket affinity such as (S:0) left out), once the
    node answers (a just restarted slurmd may show idle* for a moment)."""
    deadline = time.monotonic() + wait_s
    while True:
        state, _, found = ssh(vc, "ctl", "sinfo -h -N -n gpu01 -o '%T %G'").stdout.strip().partition(" ")
        if not state.endswith("*") or time.monotonic() > deadline:
            return state + " " + ",".join(sorted(g.split("(")[0] for g in found.split(",")))
        time.sleep(0.5)


@pytest.fixture(scope="module")
def mig(tmp_path_factory):
    reason = vcluster_unavailable()
    if reason:
        pytest.skip(reason)
    from corral.virtual.cluster import VirtualCluster
    work = tmp_path_factory.mktemp("vcmig")
    path = make_spec(work, name="cmig", compute=2)
    base = path.read_text()
    assert GPUS in base
    path.write_text(base.replace(GPUS, layout(FIRST)))
    vc = VirtualCluster(load(path))
    try:
        vc.up()
        vc.base_spec = base  # noqa: B010
        yield vc
    finally:
        vc.down()


def set_layout(vc, profiles: str, nodes=("gpu01",)):
    vc.cluster.path.write_text(vc.base_spec.replace(GPUS, layout(profiles, nodes)))
    return load(vc.cluster.path)


def boot_layout(vc, node: str) -> str:
    """What the next boot would apply and the MIG devices now: corral-mig's enabled state, its unit and
    config files (absent: the error), the MIG device count."""
    return ssh(vc, node, "systemctl is-enabled corral-mig 2>&1; cat /etc/systemd/system/corral-mig.service "
                         "/etc/corral/mig-parted.json 2>&1; nvidia-smi -L | grep -c MIG", check=False).stdout


def test_apply_rolls_the_layout_out_and_slurm_follows_on_the_rollout_only_node(mig):
    before = boot_layout(mig, "gpu02")
    result = converge(set_layout(mig, FIRST, ("gpu01", "gpu02")), "apply", command="test-mig", rollout_only=["gpu01"])
    set_layout(mig, FIRST)  # gpu02 without a layout from here on
    assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
    # gpu02: outside the rollout, its layout differs, and nothing of MIG was written, enabled or applied there
    entry = journal.get(mig.cluster.state_dir, result.run_id)
    ops = [o for o in entry["nodes"]["gpu02"]["ops"] if o["name"].startswith("mig |") or "MIG" in o["name"]]
    assert [(o["name"], o["status"]) for o in ops] == [("mig | MIG layout", "unchanged")], ops
    assert ops[0]["reason"].startswith("skipped: not in this rollout (--rollout-only): GPU 0: whole -> 3g.40gb+")
    assert boot_layout(mig, "gpu02") == before
    assert "mig | MIG layout: left as it is on gpu02 (not in --rollout-only); a later apply changes it" \
        in result.warnings
    # left for issue 54's health slice: corral-health's config (render/health.py, from the spec alone) expects
    # gpu02's new layout already, so its next check drains gpu02 ("corral: MIG devices none, expected ..."),
    # and never resumes it (the reason starts with the MIG rollout's "corral: MIG ", node/health_slurm.py).
    # Put gpu02 back for the later tests: its config without the layout, then resumed as an admin would
    assert converge(load(mig.cluster.path), "apply", limit=["gpu02"], command="test-mig-gpu02").ok
    ssh(mig, "ctl", "scontrol update nodename=gpu02 state=resume", check=False)  # fails when not drained: fine
    steps = [o.name.removeprefix("MIG rollout | ") for o in result.nodes["gpu01"].ops if o.name.startswith("MIG rollout")]
    assert steps == ["drain", "wait for jobs", "apply", "verify", "resume"]
    followed = [o.name for o in result.nodes["gpu01"].ops if o.name.startswith("after MIG")]
    assert "after MIG | slurm compute | slurmd restarted (drop-in, SPANK plugins or GRES changed)" in followed
    assert gres(mig) == "idle gpu:1g.10gb:4,gpu:2g.20gb:2,gpu:3g.40gb:2,gpu:h100:2"
    conf = ssh(mig, "ctl", "cat /etc/slurm/gres.conf").stdout
    assert "NodeName=gpu01 Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap" in conf


def test_jobs_get_mig_devices(mig):
    out = ssh(mig, "ctl", "srun -A research -w gpu01 --gres=gpu:1g.10gb:2 sh -c "
                          "'scontrol show job -d $SLURM_JOB_ID | grep -o \"GRES=[^ ]*\"'").stdout
    assert "GRES=gpu:1g.10gb:2(IDX:" in out  # the job holds two 1g.10gb MIG devices
    out = ssh(mig, "ctl", "srun -A research -w gpu01 --gres=gpu:h100:2 nvidia-smi -L").stdout
    assert out.count("GPU ") == 2


def test_health_counts_the_mig_devices(mig):
    out = json.loads(ssh(mig, "gpu01", "/usr/local/sbin/corral-health --json", check=False).stdout)
    check = next(c for c in out["checks"] if c["name"] == "gpu_mig")
    assert check["status"] == "OK" and check["message"] == "MIG devices 1g.10gb x4, 2g.20gb x2, 3g.40gb x2"


def test_validate_knows_the_mig_layout(mig, capsys):
    assert main(["validate", "-f", str(mig.cluster.path), "--json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["gres"]["status"] == "OK" and checks["gpu job"]["status"] == "OK"


def test_second_apply_changes_nothing(mig):
    result = converge(load(mig.cluster.path), "apply", command="test-mig-noop")
    assert result.ok and result.changed == 0, [(n, o.name) for n, r in result.nodes.items() for o in r.ops
                                               if o.status == "changed"]


def test_a_reboot_brings_the_layout_back_before_slurmd(mig):
    boot = ssh(mig, "gpu01", "cat /proc/sys/kernel/random/boot_id").stdout
    ssh(mig, "gpu01", f"{REBOOT_SOON} >/dev/null")  # as a rollout reboots a node
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)  # the node is back about 2 s after the reboot was asked for
        p = ssh(mig, "gpu01", "cat /proc/sys/kernel/random/boot_id; systemctl is-active slurmd", check=False)
        if p.returncode == 0 and p.stdout.split()[0] != boot.strip():
            break
    assert ssh(mig, "gpu01", "nvidia-smi -L | grep -c MIG").stdout.strip() == "8"
    for _ in range(30):
        if gres(mig).startswith("idle "):
            break
        time.sleep(1)
    assert gres(mig).startswith("idle ")  # slurmd found its MIG devices: not drained for missing GRES


def test_a_new_layout_shows_in_plan_then_apply_changes_it(mig, capsys):
    set_layout(mig, "4g.40gb, 3g.40gb")
    assert main(["plan", "-f", str(mig.cluster.path)]) == 0
    out = capsys.readouterr().out
    assert "~ mig | MIG layout  [drain + MIG reconfigure]" in out
    assert "GPU 0: 3g.40gb+2g.20gb+1g.10gb+1g.10gb -> 4g.40gb+3g.40gb" in out
    result = converge(load(mig.cluster.path), "apply", command="test-mig-2")
    assert result.ok, json.dumps(result.to_json(), indent=1)[:4000]
    assert gres(mig) == "idle gpu:3g.40gb:2,gpu:4g.40gb:2,gpu:h100:2"


def test_facts_show_the_mig_devices(mig, capsys):
    assert main(["facts", "-f", str(mig.cluster.path), "--node", "gpu01", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)["nodes"]["gpu01"]["mig_devices"]
    assert sorted(d["profile"] for d in devices) == ["3g.40gb", "3g.40gb", "4g.40gb", "4g.40gb"]
    assert all(d["files"].startswith(f"/dev/nvidia{d['gpu']},/dev/nvidia-caps/nvidia-cap") for d in devices)
