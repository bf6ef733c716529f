"""Stand-ins for the programs `corral images`' scripts call on the nodes (podman, mksquashfs, sbatch,
squeue, scancel, scontrol), so the unit tests run the real scripts with bash. mksquashfs writes a tar of
the root filesystem (squashfs-tools is not on the test host); the vcluster test runs the real ones."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

DIGEST = "sha256:" + "7" * 64

FAKES = {
    "podman": r"""#!/bin/bash
shift 6  # --root X --runroot Y --storage-driver D
case "$1" in
  pull) [ -n "${FAKE_PULL_FAIL:-}" ] && { echo "manifest unknown: $3" >&2; exit 125; }; echo "$3" >> "$FAKE_LOG";;
  image) echo "%s";;
  export) tar -C "$FAKE_ROOTFS" -cf - .;;
esac
""" % DIGEST,
    "mksquashfs": '#!/bin/bash\n[ -n "${FAKE_SLEEP:-}" ] && sleep "$FAKE_SLEEP"\ntar -C "$1" -cf "$2" .\n',
    "sbatch": r"""#!/bin/bash
while [ $# -gt 0 ]; do case "$1" in -o) o=$2; shift;; -J) j=$2; shift;; --wrap) w=$2; shift;; esac; shift; done
echo "sbatch -J $j" >> "$FAKE_LOG"
echo 42
sh -c "$w" > "$o" 2>&1  # sbatch --wrap: a #!/bin/sh script
""",
    "squeue": '#!/bin/bash\necho "squeue $*" >> "$FAKE_LOG"\nprintf "%s" "${FAKE_SQUEUE:-}"\n',
    "scancel": '#!/bin/bash\necho "scancel $*" >> "$FAKE_LOG"\n',
    "scontrol": '#!/bin/bash\n[ "$3" = "${FAKE_SCRIPT_JOB:-}" ] && echo "${FAKE_SCRIPT:-}"\ntrue\n',
    "hostname": "#!/bin/sh\necho gpu01\n",
}


def fake_bin(tmp_path: Path) -> Path:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in FAKES.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    rootfs = tmp_path / "rootfs" / "etc"
    rootfs.mkdir(parents=True)
    (rootfs / "os-release").write_text('PRETTY_NAME="corral test image"\n')
    return bin_


class LocalRun:
    """run_on's shape, running the script here with bash and the fakes first on PATH."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.bin = fake_bin(tmp_path)
        self.log = tmp_path / "fake.log"
        self.log.touch()
        self.env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", "FAKE_LOG": str(self.log),
                    "FAKE_ROOTFS": str(tmp_path / "rootfs"), **env}
        self.scripts: list[str] = []

    def __call__(self, cluster, node, command, *, timeout=120, check=False, input=None):
        self.scripts.append(command)
        try:
            stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
            return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout,
                                  env=self.env, **stdin)
        except subprocess.TimeoutExpired:
            from corral.errors import NodeError
            raise NodeError(f"command timed out after {timeout:.0f} s", node=node, command=command) from None
