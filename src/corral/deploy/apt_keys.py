"""A vendor repository's signing key on a node, pinned by fingerprint (NVIDIA's container toolkit key,
Grafana's; NVIDIA's CUDA key comes inside cuda-keyring: deploy/nvidia_repo.py): downloaded into a private
temporary directory, installed only when it holds exactly the pinned primary key (the vendor's, or the
spec's for a site's re-signed mirror), never a key that merely arrived over https."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from corral.deploy.nodestate import Want, snapshot
from corral.engine.notes import annotate
from corral.engine.shell import q, sh
from corral.render import apt


def refused(what: str, fingerprint: str) -> str:
    return f"{what}: the downloaded key is not exactly {fingerprint}; nothing installed"


def pinned_key_script(url: str, dest: str, fingerprint: str, what: str, dearmor: bool) -> str:
    """Download the key at `url`, check its primary fingerprint(s) are exactly `fingerprint`, install it at
    `dest` (binary keyring when `dearmor`, else as downloaded), remove the download."""
    directory = dest.rsplit("/", 1)[0]
    put = (f"gpg --batch --dearmor --yes -o {q(dest + '.corral-new')} \"$tmp/key\"" if dearmor
           else f"install -m 644 \"$tmp/key\" {q(dest + '.corral-new')}")
    return "\n".join([
        "set -eu", "tmp=$(mktemp -d /var/tmp/corral-key.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT",
        f"command -v gpg >/dev/null || {apt.install_script(['gpg'])}",
        f"curl -fsSL --proto '=https,http' --retry 3 --max-time 120 -o \"$tmp/key\" {q(url)}",
        "mkdir -m 700 \"$tmp/g\"",
        "fprs=$(GNUPGHOME=\"$tmp/g\" gpg --batch --show-keys --with-colons \"$tmp/key\" 2>/dev/null "
        "| awk -F: '$1 == \"pub\" {p = 1; next} p && $1 == \"fpr\" {print $10; p = 0}' | sort -u)",
        f"if [ \"$fprs\" != {q(fingerprint)} ]; then echo {q(refused(what, fingerprint))} >&2; exit 1; fi",
        f"install -d -m 755 {q(directory)}", put, f"mv -f {q(dest + '.corral-new')} {q(dest)}", ""])


@operation()
def pinned_key(path: str, url: str, fingerprint: str, what: str, dearmor: bool, want: Want):
    """The key at `path` (a no-op when it is there), else fetched from `url` and installed only when it is
    exactly `fingerprint`'s."""
    if (snapshot(want).files.get(path) or {}).get("kind") == "file":
        host.noop(f"{path} present")
        return
    annotate(disruption="none", diff=f"{path}: {what} from {url} (key {fingerprint})\n")
    yield sh(pinned_key_script(url, path, fingerprint, what, dearmor))
