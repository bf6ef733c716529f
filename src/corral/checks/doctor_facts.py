"""What `corral doctor` reads from each node, in one command (pyinfra fact), and its pure parser."""

from __future__ import annotations

from pyinfra.api import FactBase

SCRIPT = r"""
. /etc/os-release 2>/dev/null; echo "OS $ID $VERSION_ID"
echo "UID $(id -u)"
if [ "$(id -u)" != 0 ]; then sudo -n true 2>/dev/null && echo "SUDO yes" || echo "SUDO no"; fi
df -Pm / /tmp /var 2>/dev/null | awk 'NR>1 {print "DF", $6, $4}'
awk '/^MemTotal:|^MemAvailable:/ {print "MEM", $1, $2}' /proc/meminfo
echo "CLOCK $(date +%s.%N)"
ss -Hltnp 2>/dev/null | awk '{print "LISTEN", $4, $6}'
for d in /sys/bus/pci/devices/*; do
  [ "$(cat $d/vendor 2>/dev/null)" = 0x10de ] && echo "PCI ${d##*/} $(cat $d/device) $(cat $d/class)"
done
[ -e /etc/corral/emulated-gpus.json ] && echo "EMULATED yes"
if command -v nvidia-smi >/dev/null 2>&1; then
  if out=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null); then
    printf '%s\n' "$out" | sed '/^$/d; s/^/SMI /'; echo "SMI_RC 0"
  else echo "SMI_RC 1"; fi
fi
true
"""


class DoctorFacts(FactBase):
    def command(self):
        return SCRIPT

    def process(self, output) -> dict:
        return parse(list(output))


def parse(lines: list[str]) -> dict:
    facts: dict = {"os": None, "uid": None, "sudo": None, "df": {}, "mem": {}, "clock": None,
                   "listen": [], "pci": [], "emulated": False, "smi": None}
    smi: list[tuple[str, int | None]] = []
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "OS":
            facts["os"] = rest.strip()
        elif kind == "UID":
            facts["uid"] = int(rest) if rest.strip().isdigit() else None
        elif kind == "SUDO":
            facts["sudo"] = rest.strip() == "yes"
        elif kind == "DF" and len(rest.split()) == 2 and rest.split()[1].isdigit():
            facts["df"][rest.split()[0]] = int(rest.split()[1])
        elif kind == "MEM" and len(rest.split()) == 2:
            facts["mem"][rest.split()[0].rstrip(":")] = int(rest.split()[1]) // 1024
        elif kind == "CLOCK":
            try:
                facts["clock"] = float(rest)
            except ValueError:
                pass
        elif kind == "LISTEN" and rest.split():
            addr, proc = (rest.split() + [""])[:2]
            port = addr.rsplit(":", 1)[-1]
            name = proc.split('"')[1] if proc.count('"') >= 2 else ""
            if port.isdigit():
                facts["listen"].append((int(port), name))
        elif kind == "PCI" and len(rest.split()) == 3:
            slot, device, cls = rest.split()
            if cls.startswith("0x03"):  # display controllers: GPUs (NVSwitches are 0x068000)
                facts["pci"].append((slot, device))
        elif kind == "EMULATED":
            facts["emulated"] = True
        elif kind == "SMI":
            name, _, mem = rest.rpartition(",")
            smi.append((name.strip(), int(mem) if mem.strip().isdigit() else None))
        elif kind == "SMI_RC":
            facts["smi"] = smi if rest.strip() == "0" else None
    return facts
