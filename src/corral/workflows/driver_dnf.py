"""The driver install of the rollout on the RHEL family (RHEL, Rocky, AlmaLinux 9): NVIDIA's dnf
module stream, held at the spec's version by a dnf versionlock block (pure: the shell script)."""

from __future__ import annotations

import shlex

from corral.render.nvidia import LOCK_BEGIN, LOCK_END, VERSIONLOCK


def dnf_install_script(stream: str, packages: list[str], version: str, lock: str, lock_path: str = VERSIONLOCK) -> str:
    """Enable the stream, lock the version, check it is available, install; on failure the old
    lock file comes back (the stream stays enabled: it changes nothing installed)."""
    q = shlex.quote
    module = stream.split(":")[0]
    return f"""set -u
lock={q(lock_path)}; old="$lock.corral-old"; rm -f "$old"; [ -e "$lock" ] && cp -p "$lock" "$old"
restore() {{ if [ -e "$old" ]; then mv -f "$old" "$lock"; else rm -f "$lock"; fi; }}
dnf -y -q install python3-dnf-plugin-versionlock >/dev/null || {{ restore; echo 'cannot install the dnf versionlock plugin' >&2; exit 1; }}
dnf -y -q module reset {q(module)} >/dev/null && dnf -y -q module enable {q(stream)} >/dev/null || {{ restore; echo {q(f'cannot enable the module stream {stream}')} >&2; exit 1; }}
mkdir -p "$(dirname "$lock")" && touch "$lock" && sed -i '/^{LOCK_BEGIN}/,/^{LOCK_END}/d' "$lock" && printf '%s' {q(lock)} >> "$lock" || {{ restore; exit 1; }}
dnf -q list --available --showduplicates nvidia-driver 2>/dev/null | grep -Eq '[ :]'{q(version)}'-' || {{ restore; echo {q(f"nvidia-driver {version} is not available from this node's repositories (stream {stream})")} >&2; exit 3; }}
dnf -y -q install {" ".join(q(p) for p in packages)} || {{ restore; exit 1; }}
rm -f "$old"
"""
