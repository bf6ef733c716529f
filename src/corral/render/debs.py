"""Install a vendor's release .debs (enroot, nvidia-mig-manager): the shell script, pure."""

from __future__ import annotations

import shlex


def release_debs_script(label: str, sums_key: str, packages: list[str], version: str, url: str,
                        sums: dict[str, str]) -> str:
    """Download each package's .deb for the node's architecture (`url` with {package}, {version},
    {arch}), check its sha256 where `sums` has one, install them together (apt brings their
    dependencies). On any failure nothing is installed, and no download is left behind."""
    q = shlex.quote
    lines = ["set -eu", "arch=$(dpkg --print-architecture)",
             f"tmp=$(mktemp -d /var/tmp/corral-{label}.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT"]
    debs = []
    for p in packages:
        link = url.format(version=version, package=p, arch="\0")  # the node's arch, read when it runs
        link = "'" + link.replace("'", "'\\''").replace("\0", "'\"$arch\"'") + "'"
        deb = f"\"$tmp\"/{q(p)}.deb"
        lines.append(f"curl -fsSL --retry 3 -o {deb} {link} || {{ echo {q(f'{label}: cannot download {p}')} >&2; exit 1; }}")
        if p in sums:
            lines.append(f"echo {q(sums[p])} {deb} | sha256sum -c --quiet - || "
                         f"{{ echo {q(f'{label}: {p} does not match {sums_key}; nothing installed')} >&2; exit 1; }}")
        debs.append(deb)
    lines.append("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                 "-o Dpkg::Options::=--force-confold " + " ".join(debs))
    return "\n".join(lines) + "\n"
