#!/usr/bin/env bash
# GPU evidence: run corral's GPU facts, node health checks and a short matmul burn against a REAL
# NVIDIA GPU (no emulation) and print a table. Run from the repository root on a GPU machine:
#   bash scripts/gpu-evidence.sh > gpu-evidence.txt
# Needs python3 and nvidia-smi; the burn needs PyTorch with CUDA (skipped with a reason otherwise); the
# acceptance section runs dcgmi / gpu_burn / all_reduce_perf where present (validate's parsers on them).
# It changes nothing on the machine: read-only queries, a temporary health config, no Slurm actions,
# no GPU setting touched.
set -u
cd "$(dirname "$0")/.."
echo "# corral GPU evidence — $(date -u +%FT%TZ) on $(hostname)"
echo
echo "## nvidia-smi"
if ! command -v nvidia-smi >/dev/null; then echo "nvidia-smi not found: not a GPU machine"; exit 2; fi
nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id,persistence_mode,mig.mode.current,temperature.gpu --format=csv
echo
echo "## PCI scan (works before any driver): vendor 0x10de display controllers"
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && echo "${d##*/} device=$(cat "$d/device") class=$(cat "$d/class")"
done
echo
echo "## corral doctor GPU facts (parsed by corral.checks.doctor_facts)"
PYTHONPATH=src python3 - <<'PY'
import subprocess
from corral.checks.doctor_facts import SCRIPT, parse
facts = parse(subprocess.run(["sh", "-c", SCRIPT], capture_output=True, text=True).stdout.splitlines())
print(f"pci gpus: {len(facts['pci'])}, driver gpus: {len(facts['smi'] or [])}, emulated: {facts['emulated']}")
for name, mem in facts["smi"] or []:
    print(f"  {name}: {mem} MiB")
PY
echo
echo "## corral facts parsers on this machine's real output (corral/facts/)"
PYTHONPATH=src python3 - <<'PY'
import subprocess
from corral.facts.gpu import KernelModule, NvidiaSmiGpus, parse_kernel_module, parse_nvidia_smi, reboot_required
from corral.facts.gpu_topology import NvidiaTopology, gres_cores, gres_links, parse_topology
def sh(cmd):
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout
smi = parse_nvidia_smi(sh(NvidiaSmiGpus().command()).splitlines())
print(f"driver {smi and smi.get('driver_version')}, CUDA {smi and smi.get('cuda_version')}, "
      f"GPUs {len(smi['gpus']) if smi else 0}")
for g in (smi or {}).get("gpus", []):
    print("  ", {k: g[k] for k in sorted(g)})
module = parse_kernel_module(sh(KernelModule().command()).splitlines())
print(f"kernel module loaded {module['loaded']}, installed {module['installed']}, packages {module['packages']}")
print("reboot required: %s (%s)" % reboot_required(module["loaded"], module["installed"]))
try:
    topo = parse_topology(sh(NvidiaTopology().command()))
    print("gres.conf Links=", gres_links(topo))
    print("gres.conf Cores=", gres_cores(topo))
except Exception as e:  # noqa: BLE001 - evidence: show what failed
    print(f"topology: {type(e).__name__}: {e}")
from corral.facts.mig import COMMAND as MIG_COMMAND, split_output
out = sh(MIG_COMMAND)
print("MIG devices (nvidia-smi mig -lci + mig-minors):", [d.files() + " " + d.profile for d in split_output(out.splitlines())]
      or "none", "| raw -lci head:", " / ".join(out.splitlines()[:3]))
print()
print("## driver plan against this real driver (corral/render/nvidia.py, deploy/nvidia_driver.py)")
from corral.render.nvidia import installed_matches
version = smi and smi.get("driver_version")
installed = max(module["packages"].values(), default=None) if module["packages"] else None
print(f"spec nvidia.driver.version = {version} (the running driver); installed package version = {installed}")
if version and installed and installed_matches(installed, version):
    print("plan: driver installed at the spec's version -> nothing to change (only the pin, if absent)")
elif version and module["installed"] == version:
    print("plan: module on disk matches the spec's version (no Debian package to compare) -> no reboot needed")
else:
    print(f"plan: would roll out (reboot + drain): installed {installed or module['installed']} vs spec {version}")
PY
echo
echo "## corral-health (stdlib node program; read-only: no --act)"
n=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
cfg=$(mktemp); state=$(mktemp)
printf '{"node": "%s", "expected_gpus": %s, "max_gpu_temp_c": 90, "mounts": ["/"], "services": [], "min_free_mb": {"/": 256}, "timeout_s": 30, "state_file": "%s"}\n' "$(hostname -s)" "$n" "$state" > "$cfg"
python3 src/corral/node/health.py --config "$cfg" || true
rm -f "$cfg" "$state"
echo
echo "## matmul burn (bf16, 8192^3, ~10 s per GPU)"
python3 - <<'PY'
try:
    import torch
except ImportError:
    print("SKIPPED: PyTorch not installed (pip install torch)"); raise SystemExit(0)
if not torch.cuda.is_available():
    print("SKIPPED: torch.cuda.is_available() is False"); raise SystemExit(0)
import time
FLOOR = {"H100": 600, "H200": 600, "A100": 200, "L40S": 150, "B200": 1200}  # TFLOP/s bf16 dense, conservative
print(f"{'gpu':<4}{'name':<28}{'TFLOP/s':>10}{'floor':>8}  verdict")
for i in range(torch.cuda.device_count()):
    dev = torch.device("cuda", i)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16); b = torch.randn_like(a)
    for _ in range(3): a @ b
    torch.cuda.synchronize(dev); n, t0 = 0, time.time()
    while time.time() - t0 < 10:
        a @ b; n += 1
    torch.cuda.synchronize(dev); dt = time.time() - t0
    tflops = 2 * 8192**3 * n / dt / 1e12
    name = torch.cuda.get_device_name(i)
    floor = next((v for k, v in FLOOR.items() if k in name.upper()), None)
    verdict = "n/a" if floor is None else ("OK" if tflops >= floor else "BELOW FLOOR")
    print(f"{i:<4}{name:<28}{tflops:>10.1f}{floor or '-':>8}  {verdict}")
PY
echo
echo "## validate's acceptance parsers on this machine's tools (corral/checks/acceptance_*.py)"
# Read-only and bounded: dcgmi diag -r 1 (software checks), a 30 s gpu_burn, one all_reduce_perf sweep,
# each under `timeout`; nothing changes GPU settings. A tool that is absent is skipped, saying so
# (GPU_BURN_DIR / NCCL_TESTS_DIR may point at a tree built by hand; nothing is downloaded).
PYTHONPATH=src python3 - <<'PY'
import os, shutil, subprocess
from corral.checks.acceptance_eval import burn_verdict, dcgm_verdict, nccl_verdict
from corral.checks.acceptance_parse import parse_dcgm_diag
from corral.spec.gpus import GPU_MODELS
from corral.spec.models_acceptance import default_floors

def sh(argv, timeout, cwd=None):
    try:
        p = subprocess.run(["timeout", "-k", "10", str(timeout), *argv], capture_output=True, text=True, cwd=cwd)
    except OSError as e:
        return 127, "", str(e)
    return p.returncode, p.stdout, p.stderr

def raw(text, n=6):
    for line in text.replace("\r", "\n").strip().splitlines()[-n:]:
        print("   |", line[:160])

def find(names, corral_path, env):
    if os.environ.get(env):
        for n in names:
            p = os.path.join(os.environ[env], n)
            if os.access(p, os.X_OK):
                return p
    for n in names:
        if shutil.which(n):
            return shutil.which(n)
    return corral_path if os.access(corral_path, os.X_OK) else None

names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                       text=True).stdout.strip().splitlines()
gpus = len(names)
model = next((m for m in sorted(GPU_MODELS, key=len, reverse=True) if names and m in names[0].lower()), None)
floor = default_floors().get(model) if model else None
print(f"{gpus} GPUs ({names[0] if names else '?'}): spec model {model or 'unknown'}, corral's burn floor {floor}")

print("\n### dcgm diag (dcgmi diag -r 1 -j)")
if not shutil.which("dcgmi"):
    print("SKIPPED: dcgmi not found (DCGM not installed)")
else:
    rc, out, err = sh(["dcgmi", "diag", "-r", "1", "-j"], 600)
    status, detail, fig = dcgm_verdict(out, err, rc, 1)
    print(f"rc={rc} -> {status}: {detail}")
    try:
        for r in parse_dcgm_diag(out).results:
            print(f"   {r.category}/{r.test} {r.entity or '-'}: {r.status} {' '.join(r.messages)[:120]}")
    except ValueError:
        raw(out or err)

print("\n### gpu burn (gpu_burn -stts 5 [-c compare] 30)")
burn = find(["gpu_burn", "gpu-burn"], "/usr/local/lib/corral/gpuburn/gpu_burn", "GPU_BURN_DIR")
if burn is None:
    print("SKIPPED: gpu_burn not found (PATH, /usr/local/lib/corral/gpuburn, $GPU_BURN_DIR)")
else:
    here = os.path.dirname(burn)
    compare = next((os.path.join(here, c) for c in ("compare.ptx", "compare.fatbin")
                    if os.path.exists(os.path.join(here, c))), None)
    rc, out, err = sh([burn, "-stts", "5", *(["-c", compare] if compare else []), "30"], 180, cwd=here)
    print(f"{burn} rc={rc} -> %s: %s" % burn_verdict(out, err, rc, gpus, floor, model or "unknown")[:2])
    raw(out, 12)

print("\n### nccl all-reduce (all_reduce_perf -b 8M -e 1G -f 2 -g N)")
ar = find(["all_reduce_perf"], "/usr/local/lib/corral/nccl-tests/all_reduce_perf", "NCCL_TESTS_DIR")
if ar is None:
    print("SKIPPED: all_reduce_perf not found (PATH, /usr/local/lib/corral/nccl-tests, $NCCL_TESTS_DIR)")
else:
    rc, out, err = sh([ar, "-b", "8M", "-e", "1G", "-f", "2", "-g", str(max(gpus, 1))], 300)
    print(f"{ar} rc={rc} -> %s: %s" % nccl_verdict(out, err, rc, max(gpus, 1), None)[:2])
    if gpus < 2:
        print("   (1 GPU: busbw is 0 by definition, 2(n-1)/n; the parse is what is shown)")
    raw(out, 8)
PY
