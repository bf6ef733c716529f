"""GPU emulation for virtual nodes (virtual cluster ONLY, never used on real nodes).

Each declared GPU gets a character device /dev/nvidiaN (195:N; plus /dev/nvidiactl 195:255) made at
every boot by systemd-tmpfiles: open() gives ENXIO (there is no driver), stat() works, and Slurm's
device cgroup can allow or deny it. A stand-in `nvidia-smi` reports the declared model, memory and
count, honours CUDA_VISIBLE_DEVICES and says "emulated".

Driver emulation: at every boot tmpfiles copies the version of the installed stand-in driver package
(corral-test-nvidia-driver, built by the driver-lifecycle tests) to /run/corral-emulated/nvidia-module-version,
as a real boot loads the installed kernel module; without it, the version of a real driver package's module
source (Debian's nvidia-kernel-dkms: /usr/src/nvidia-*/dkms.conf), which DKMS would have built and the boot
loaded. The stand-in nvidia-smi reports that version, and fails as with an unloadable driver when it reads
"broken". With neither it reports "emulated".

MIG emulation: a stand-in `nvidia-mig-parted` records the instances a config asks for in /run (gone
at reboot, as GPU instances are) and makes their /dev/nvidia-caps access devices; the stand-in
nvidia-smi answers `mig -lci` and lists MIG devices in `-L`; the driver's mig-minors table is
bind-mounted over /proc/driver at boot (corral-emulated-procfs.service), where real drivers publish it.
"""

from __future__ import annotations

import json
import uuid
from importlib import resources
from pathlib import Path

from corral.facts.mig import minors_table
from corral.spec.cluster import Node
from corral.spec.gpus import gpu_model

TMPFILES = "etc/tmpfiles.d/corral-emulated-gpus.conf"
CONF = "etc/corral/emulated-gpus.json"
EMULATED_RUN = "/run/corral-emulated"
STANDIN_VERSION = "/usr/lib/corral-test-nvidia-driver/version"  # shipped by the tests' stand-in package
PROC_DRIVER = "usr/lib/corral-emulated/proc-driver"
PROCFS_UNIT = "etc/systemd/system/corral-emulated-procfs.service"
PROCFS_WANTS = "etc/systemd/system/sysinit.target.wants/corral-emulated-procfs.service"
RUN_PROC_DRIVER = f"{EMULATED_RUN}/proc-driver"
PROCFS_SH = "usr/lib/corral-emulated/procfs.sh"
# nvidia-persistenced (Debian's package, nvidia.driver.source: distribution) keeps the kernel driver's state: with no
# driver behind the device files the real daemon exits at once ("failed to initialize"). Its package, unit and
# enablement stay real; on a virtual node this drop-in runs a process in its place, as its own user
PERSISTENCED_DROPIN = "etc/systemd/system/nvidia-persistenced.service.d/corral-emulated.conf"
PERSISTENCED_SH = "usr/lib/corral-emulated/nvidia-persistenced"
PERSISTENCED_TEXT = ("# corral virtual cluster: EMULATED nvidia-persistenced (no kernel driver to keep persistent)\n"
                     f"[Service]\nType=simple\nUser=nvpd\nExecStart=\nExecStart=/{PERSISTENCED_SH}\n")
PERSISTENCED_SCRIPT = ("#!/bin/sh\n# corral virtual cluster: EMULATED nvidia-persistenced: there is no kernel driver "
                       "whose state it could keep\nexec sleep infinity\n")
PROCFS_SCRIPT = f"""#!/bin/sh
# corral virtual cluster: EMULATED /proc/driver, made at boot; nvidia/version names the "loaded"
# module (the stand-in driver package's version, copied to /run by tmpfiles), as a real driver's does
set -e
rm -rf {RUN_PROC_DRIVER}
cp -a /{PROC_DRIVER} {RUN_PROC_DRIVER}
if [ ! -s {EMULATED_RUN}/nvidia-module-version ]; then
  # no stand-in driver package: a real one's kernel module source (DKMS), the module a real boot would load
  v=$(sed -n 's/^PACKAGE_VERSION="\\{{0,1\\}}\\([0-9.]*\\).*/\\1/p' /usr/src/nvidia*/dkms.conf 2>/dev/null | sort -V | tail -n 1)
  [ -z "$v" ] || echo "$v" > {EMULATED_RUN}/nvidia-module-version
fi
v=$(cat {EMULATED_RUN}/nvidia-module-version 2>/dev/null || true)
case "$v" in
  [0-9]*) mkdir -p {RUN_PROC_DRIVER}/nvidia
          printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  (corral emulation)\\n' "$v" > {RUN_PROC_DRIVER}/nvidia/version ;;
esac
mount --bind {RUN_PROC_DRIVER} /proc/driver
"""
PROCFS_TEXT = ("# corral virtual cluster: EMULATED driver files under /proc/driver (mig-minors, nvidia/version)\n"
               "[Unit]\nDescription=corral emulation: /proc/driver of an NVIDIA driver\nDefaultDependencies=no\n"
               "After=systemd-tmpfiles-setup.service\n"
               "Before=sysinit.target corral-mig.service slurmd.service\n\n"
               f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh /{PROCFS_SH}\n")


def describe(node: Node) -> list[dict]:
    if not node.gpus:
        return []
    known = gpu_model(node.gpus.model)
    name = known.name if known else f"NVIDIA {node.gpus.model.upper()}"
    cc = known.compute_cap if known else "8.0"
    mem_gib = node.gpus.memory_gib or (known.memory_gib if known else 16)
    return [{"index": i, "name": name, "memory_mib": mem_gib * 1024, "compute_cap": cc,
             "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{node.name}.gpu{i}.corral")),
             "bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0"} for i in range(node.gpus.count)]


def paths(root: Path) -> tuple[Path, ...]:
    """What install() writes (or removes) in a node's tree: tmpfiles.d entries, the GPU description, the stand-in
    tools, the MIG minors table, the procfs unit, its wants link and script."""
    return (root / TMPFILES, root / CONF, root / "usr/bin/nvidia-smi", root / "usr/bin/nvidia-mig-parted",
            root / PROC_DRIVER / "nvidia-caps/mig-minors", root / PROCFS_UNIT, root / PROCFS_WANTS, root / PROCFS_SH,
            root / PERSISTENCED_DROPIN, root / PERSISTENCED_SH)


def install(node: Node, root: Path) -> None:
    """Write the tmpfiles.d device entries, the GPU description and the stand-in nvidia-smi."""
    gpus = describe(node)
    tmpfiles, conf, smi, parted, minors, unit, wants, script, dropin, persistenced = paths(root)
    if not gpus:
        for f in (tmpfiles, conf, smi, parted, minors, unit, wants, script, dropin, persistenced):
            f.unlink(missing_ok=True)
        return
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(PERSISTENCED_TEXT)
    persistenced.parent.mkdir(parents=True, exist_ok=True)
    persistenced.write_text(PERSISTENCED_SCRIPT)
    persistenced.chmod(0o755)
    tmpfiles.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# corral virtual cluster: EMULATED GPU device files (no driver behind them)"]
    lines += [f"c /dev/nvidia{g['index']} 0666 root root - 195:{g['index']}" for g in gpus]
    lines.append("c /dev/nvidiactl 0666 root root - 195:255")
    lines.append(f"d {EMULATED_RUN} 0755 root root -")
    lines.append(f"C {EMULATED_RUN}/nvidia-module-version - - - - {STANDIN_VERSION}")
    tmpfiles.write_text("\n".join(lines) + "\n")
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(json.dumps({"emulated": True, "model": node.gpus.model, "gpus": gpus}, indent=1) + "\n")
    for tool, name in ((smi, "nvidia-smi"), (parted, "nvidia-mig-parted")):
        tool.write_bytes(resources.files("corral.virtual").joinpath(f"files/{name}").read_bytes())
        tool.chmod(0o755)
    minors.parent.mkdir(parents=True, exist_ok=True)
    minors.write_text(minors_table(len(gpus)))
    script.write_text(PROCFS_SCRIPT)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(PROCFS_TEXT)
    wants.parent.mkdir(parents=True, exist_ok=True)
    if not wants.is_symlink():
        wants.symlink_to(f"/{PROCFS_UNIT}")
