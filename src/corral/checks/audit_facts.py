"""What `corral audit` reads from each node, in one read-only command (a pyinfra fact, bounded), and its pure
parser: every process (user, systemd unit, name), every listening socket (with its process), the setuid and
setgid files of the local file systems (with the package that owns each and whether it is as packaged), the
world-writable directories without the sticky bit, the sudo rules, and who may use cron and at.

The command's own processes (its shell, the SSH session it runs in) are named by PID, so that the audit never
reports itself. Nothing here changes the node.
"""

from __future__ import annotations

from pyinfra.api import FactBase

SCRIPT = r"""
p=$$; while [ "$p" -gt 1 ] 2>/dev/null; do echo "SELF $p"; p=$(awk '{print $4}' /proc/$p/stat 2>/dev/null || echo 0); done
ps -eo pid=,ppid=,uid=,user:40=,unit:80=,comm= 2>/dev/null | awk '{print "PROC", $0}'
ss -Hltunp 2>/dev/null | awk '{print "LISTEN", $1, $5, $7}'
timeout 60 find / -xdev \( -perm -4000 -o -perm -2000 \) -type f 2>/dev/null | while IFS= read -r f; do
  owner=$(dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}" 2>/dev/null); pkg=${owner%%: *}; pkg=${pkg%%:*}
  state=-
  if [ -n "$pkg" ]; then
    rel=$(dpkg -S "$f" >/dev/null 2>&1 && echo "${f#/}" || echo "${f#/usr/}")
    want=$(cat /var/lib/dpkg/info/"$pkg".md5sums /var/lib/dpkg/info/"$pkg":*.md5sums 2>/dev/null \
      | awk -v f="$rel" '$2 == f {print $1; exit}')
    have=$(md5sum < "$f" | cut -d' ' -f1)
    [ "$want" = "$have" ] && state=packaged || state=modified
  fi
  echo "SUID $(stat -c '%a %U:%G' "$f") ${pkg:--} $state $f"
done
timeout 60 find / -xdev -type d -perm -0002 ! -perm -1000 2>/dev/null | sed 's/^/OPEN /'
for f in /etc/sudoers /etc/sudoers.d/*; do
  [ -f "$f" ] && grep -vE '^[[:space:]]*(#|$)' "$f" | sed "s|^|SUDO $f |"
done
echo "SUDOERS $(getent group sudo | cut -d: -f4)"
for f in /etc/cron.allow /etc/cron.deny /etc/at.allow /etc/at.deny; do
  [ -f "$f" ] && echo "ACL $f $(grep -vE '^[[:space:]]*(#|$)' "$f" | tr '\n' ' ')"
done
for d in cron atd; do command -v $d >/dev/null 2>&1 && echo "HAS $d"; done
ls /var/spool/cron/crontabs 2>/dev/null | sed 's/^/CRONTAB /'
true
"""


class AuditFacts(FactBase):
    def command(self):
        return SCRIPT

    def process(self, output) -> dict:
        return parse(list(output))


def _listen(rest: str) -> dict | None:
    """`ss -Hltunp`'s netid, local address:port and process column -> {proto, address, port, pids}."""
    parts = rest.split(" ", 2)
    if len(parts) < 2:
        return None
    address, _, port = parts[1].rpartition(":")
    if not port.isdigit():
        return None
    pids = []
    for chunk in (parts[2] if len(parts) > 2 else "").split("pid=")[1:]:
        digits = chunk.split(",", 1)[0]
        if digits.isdigit():
            pids.append(int(digits))
    return {"proto": parts[0], "address": address.strip("[]").split("%", 1)[0], "port": int(port), "pids": pids}


def parse(lines: list[str]) -> dict:
    """The command's lines -> {self, procs, listen, suid, open, sudo, sudo_group, acl, has, crontabs}. A line
    that is not understood is counted (`unparsed`), never raised."""
    facts: dict = {"self": [], "procs": {}, "listen": [], "suid": [], "open": [], "sudo": [], "sudo_group": [],
                   "acl": {}, "has": set(), "crontabs": [], "unparsed": 0}
    for line in lines:
        kind, _, rest = line.partition(" ")
        words = rest.split()
        if kind == "SELF" and rest.strip().isdigit():
            facts["self"].append(int(rest))
        elif kind == "PROC" and len(words) >= 6 and words[0].isdigit() and words[1].isdigit() and words[2].isdigit():
            facts["procs"][int(words[0])] = {"ppid": int(words[1]), "uid": int(words[2]), "user": words[3],
                                             "unit": words[4], "comm": " ".join(words[5:])}
        elif kind == "LISTEN" and (entry := _listen(rest)) is not None:
            facts["listen"].append(entry)
        elif kind == "SUID" and len(words) >= 5:
            facts["suid"].append({"mode": words[0], "owner": words[1], "package": None if words[2] == "-" else words[2],
                                  "state": words[3], "path": rest.split(" ", 4)[4]})
        elif kind == "OPEN" and rest.startswith("/"):
            facts["open"].append(rest)
        elif kind == "SUDO" and len(words) >= 2:
            facts["sudo"].append((words[0], rest.split(" ", 1)[1].strip()))
        elif kind == "SUDOERS":
            facts["sudo_group"] = [u for u in rest.strip().split(",") if u]
        elif kind == "ACL" and words:
            facts["acl"][words[0]] = words[1:]
        elif kind == "HAS" and words:
            facts["has"].add(words[0])
        elif kind == "CRONTAB" and words:
            facts["crontabs"].append(words[0])
        elif line.strip():
            facts["unparsed"] += 1
    return facts
