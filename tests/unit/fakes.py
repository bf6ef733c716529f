"""Stand-ins for the rollout and removal tests: `Clock`, the clock passed to a rollout (sleeping moves
it, nothing waits), `seam(fake)`, a scripted cluster as the rollouts' `run(node, command, timeout)`
(a GPU node answers as Ubuntu 22.04 without NVSwitches unless the fake says otherwise), and `SlurmController`, slurmctld on ctl as `scontrol` shows and updates nodes
(drain reasons kept per node; every drain and resume logged)."""

from __future__ import annotations

import shlex


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_800_000_000.0 + self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


OS_RELEASE = ". /etc/os-release"


def seam(fake):
    """`fake(cluster, node, command, timeout=...)` (the shape of engine/remote.py run_on) as the run seam."""
    import subprocess

    def run(node, command, timeout):
        if command.startswith(OS_RELEASE):
            return subprocess.CompletedProcess(command, 0, "ubuntu 22.04\n", "")
        return fake(None, node, command, timeout=timeout)
    return run


class SlurmController:
    """Mixed into a scripted cluster: `controller(command)` answers scontrol show/update on ctl."""

    def __init__(self) -> None:
        self.reason: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []

    def controller(self, command: str) -> tuple[int, str, str]:
        words = shlex.split(command)
        if command.startswith("scontrol show node"):
            n = words[-1]
            r = f" Reason={self.reason[n]} [root@x]" if n in self.reason else ""
            return 0, f"NodeName={n} State=IDLE{'+DRAIN' if r else ''}{r}\n", ""
        n = words[2].split("=", 1)[1] if command.startswith("scontrol update") else ""
        if "state=drain" in command:
            self.reason[n] = words[-1].split("=", 1)[1]
            self.log.append((n, "drain"))
        elif "state=resume" in command:
            self.reason.pop(n, None)
            self.log.append((n, "resume"))
        return 0, "", ""
