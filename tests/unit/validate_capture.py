"""validate's seam answered with captured Slurm output (tests/fixtures/slurm*, and srun/sacct/munge lines
in the shapes those print) and the acceptance tools' output (tests/fixtures/acceptance/): the runner and
the captures tests/unit/test_validate_seam.py, test_validate_bounds.py and test_validate_acceptance.py
share."""

from __future__ import annotations

import subprocess
from pathlib import Path

from corral.render.ctld_restart import JUDGE

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - names: gpu[01-02]
    addresses: 10.0.0.[11-12]
    roles: [compute]
    gpus: {model: h100, count: 4}
"""
PING_UP = (FIX / "slurm_exporter" / "scontrol_ping_up.txt").read_text() + "slurm 22.05.8\n"
# `scontrol ping` with slurmctld stopped: its lines of the capture (up to the next `rc=` line)
_DOWN = (FIX / "slurm_exporter" / "controller_down.txt").read_text()
PING_DOWN = _DOWN[_DOWN.index("Slurmctld(primary)"):_DOWN.index("rc=1", _DOWN.index("Slurmctld(primary)"))]
SHOWN = (FIX / "slurm_cmd" / "show_node_o.txt").read_text().splitlines()  # gpu01 idle, gpu02 drained, gpu03 down
GPU01 = SHOWN[0]
GPU02_DRAINED = SHOWN[1]
GPU02_IDLE = GPU01.replace("gpu01", "gpu02").replace("10.213.0.11", "10.213.0.12")
UP = "active\nactive\n"   # systemctl is-active slurmd munge
GPU_SRUN = "--ntasks-per-node=1 "           # in the GPU job's srun only
MULTI_SRUN = "-N2 -w "                      # in the multi-node job's srun only
GPU_JOB = "gpu01 4241 0,1,2,3 4\ngpu02 4241 0,1,2,3 4\n"   # hostname, job, CUDA_VISIBLE_DEVICES, nvidia-smi -L count
MULTI = "4242 gpu01\n4242 gpu02\n"
SACCT = "4242|COMPLETED|root\n"
CRED = "MUNGE:AwQFAAC9cXzJ0Fv0pLxW:\n"
UNMUNGE = "STATUS:          Success (0)\nENCODE_HOST:     ctl (10.0.0.10)\n"
ACCEPT = FIX / "acceptance"
DCGM_PASS = (ACCEPT / "dcgm4_diag_r1_pass.json").read_text()   # 4 H100s, as the spec's nodes
DIAG = "dcgmi diag "                        # in the DCGM diagnostics' srun only (validate's default level 1)
# the restart judge on the controller (node/ctld_restart.py) after a clean restart, as it prints it
JUDGED_CLEAN = ('{"last": {"at": "2026-12-05T16:21:36.830", "previous_started": "2026-12-05T16:20:42.859", '
                '"clean": true, "lost": [], "reran": [], "recovered": 356, "not_understood": 0, "recovery_done": true}, '
                '"last_unclean": null, "last_unclean_age_s": null, "nrestarts": 0}\n')


class Captured:
    """The runner: a command -> (rc, stdout, stderr) or an exception to raise; a key matches the whole
    command, or (ending in a space) any part of it. `nodes`: answers for one node first. Records every
    call, and the timeout each was given."""

    def __init__(self, nodes: dict[str, dict] | None = None, **over) -> None:
        self.answers = {"scontrol ping; scontrol version": (0, PING_UP, ""),
                        "scontrol show node -o": (0, "\n".join([GPU01, GPU02_IDLE, SHOWN[2]]) + "\n", ""),
                        "systemctl is-active slurmd munge": (0, UP, ""),
                        GPU_SRUN: (0, GPU_JOB, ""),
                        MULTI_SRUN: (0, MULTI, ""),
                        "sacct ": (0, SACCT, ""),
                        "munge -n": (0, CRED, ""),
                        "unmunge": (0, UNMUNGE, ""),
                        DIAG: (0, DCGM_PASS, ""),
                        "scancel ": (0, "", ""),
                        JUDGE: (0, JUDGED_CLEAN, "")}
        self.answers.update({k.replace("_", " "): v for k, v in over.items()})
        self.nodes = nodes or {}
        self.calls: list[tuple[str, str, str | None]] = []
        self.timeouts: dict[str, float] = {}  # command -> its timeout (the last call of it)

    def __call__(self, node: str, command: str, *, timeout: float = 120, input: str | None = None):
        self.calls.append((node, command, input))
        self.timeouts[command] = timeout
        for key, answer in [*self.nodes.get(node, {}).items(), *self.answers.items()]:
            if command == key or (key.endswith(" ") and key in command):
                if isinstance(answer, BaseException):
                    raise answer
                rc, out, err = answer
                return subprocess.CompletedProcess(command, rc, out, err)
        raise AssertionError(f"validate ran a command this test has no capture for, on {node}: {command}")

    def sent(self, node: str | None = None) -> list[str]:
        return [c for n, c, _ in self.calls if node is None or n == node]


