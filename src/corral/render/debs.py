"""Install a vendor's release .debs (enroot, nvidia-mig-manager): the shell script, pure."""

from __future__ import annotations

import shlex

from corral.render import apt


def url_script(url: str, version: str, package: str) -> str:
    """The download URL as one shell word, its {arch} the node's (read when the script runs):
    each literal piece quoted, `$arch` between them in double quotes."""
    pieces = url.format(version=version, package=package, arch="\0").split("\0")
    return '"$arch"'.join(shlex.quote(piece) for piece in pieces)


def release_debs_script(label: str, sums_key: str, packages: list[str], version: str, url: str,
                        sums: dict[str, str] | str) -> str:
    """Download each package's .deb for the node's architecture (`url` with {package}, {version},
    {arch}), check its sha256 (`sums` "skip": unchecked, said on stderr; a package without a sum:
    refused), install them together (apt brings their dependencies). On any failure nothing is
    installed, and no download is left behind."""
    q = shlex.quote
    lines = ["set -eu", "arch=$(dpkg --print-architecture)",
             f"tmp=$(mktemp -d /var/tmp/corral-{q(label)}.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT"]
    debs = []
    for i, p in enumerate(packages):
        lines.append(f"curl -fsSL --retry 3 --max-time 300 -o \"$tmp/{int(i)}.deb\" {url_script(url, version, p)} || "
                     f"{{ echo {q(f'{label}: cannot download {p}')} >&2; exit 1; }}")
        if sums == "skip":
            lines.append(f"echo {q(f'{label}: {p} installed unchecked ({sums_key}: skip)')} >&2")
        elif p in sums:
            lines.append(f"echo {q(sums[p])} \"$tmp/{int(i)}.deb\" | sha256sum -c --quiet - || "
                         f"{{ echo {q(f'{label}: {p} does not match {sums_key}; nothing installed')} >&2; exit 1; }}")
        else:
            lines.append(f"echo {q(f'{label}: no sha256 for {p} in {sums_key}; nothing installed')} >&2; exit 1")
        debs.append(f"\"$tmp/{int(i)}.deb\"")
    lines.append(apt.install_script(downgrade=True, confold=True, words=" ".join(debs)))
    return "\n".join(lines) + "\n"
