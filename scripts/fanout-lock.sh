#!/usr/bin/env bash
# Writes src/corral/fanout/wheels-lock.txt: for each compiled dependency pinned in scripts/constraints.txt, the
# sha256 of the wheel pip picks for each Python a node release runs (3.11, 3.12, 3.13) on x86_64 and aarch64.
# Run after changing scripts/constraints.txt (needs the package registry); review the diff before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -I - <<'PY'
import hashlib, pathlib, subprocess, sys, tempfile
sys.path.insert(0, "src")
from corral.fanout import wheels
pins = [l.split("==") for l in pathlib.Path("scripts/constraints.txt").read_text().splitlines()
        if l.strip() and not l.startswith("#")]
lines = ["# corral's fan-out runtime for nodes of another Python: the only wheel files it fetches or takes from its cache",
         "# (name version python machine sha256 file), written by scripts/fanout-lock.sh from scripts/constraints.txt"]
for machine in ("x86_64", "aarch64"):
    for py in ("3.11", "3.12", "3.13"):
        for name, ver in pins:
            d = pathlib.Path(tempfile.mkdtemp())
            subprocess.run([sys.executable, "-I", "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                            "--only-binary=:all:", "--python-version", py, "--implementation", "cp",
                            "--abi", "cp" + py.replace(".", ""), *[a for p in wheels.platforms(machine)
                                                                    for a in ("--platform", p)],
                            "-d", str(d), f"{name}=={ver}"], check=True, timeout=300)
            (whl,) = d.glob("*.whl")
            lines.append(f"{name} {ver} {py} {machine} {hashlib.sha256(whl.read_bytes()).hexdigest()} {whl.name}")
pathlib.Path("src/corral/fanout/wheels-lock.txt").write_text("\n".join(lines) + "\n")
PY
