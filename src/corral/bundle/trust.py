"""Which key a bundle is checked with, and the keyring the nodes' apt trusts for it: the pinned key alone.

A bundle carries its signer's public key (corral-bundle.gpg), but key material that arrives with the
artefact proves nothing: whoever can alter the file can add their own key to it, and gpgv (and apt's
signed-by=) accept a signature by *any* key of a keyring. So the keyring used is exported from this state
dir's key home when that holds the pinned key, else the carried keyring reduced to exactly the one primary
key with the pinned fingerprint (imported into a throwaway home, only that key exported again); and every
signature check also compares gpgv's VALIDSIG primary fingerprint with the pinned one (sign.verify).
"""

from __future__ import annotations

import tarfile
import tempfile
from functools import lru_cache
from pathlib import Path

from corral.bundle import sign
from corral.errors import CorralError, HostToolError


def expected_fingerprint(cluster) -> str | None:
    """The key a bundle must be signed with: the spec's packages.fingerprint, else this state dir's key."""
    pinned = getattr(cluster.spec.packages, "fingerprint", None)
    if pinned:
        return pinned.upper()
    return sign.fingerprint(key_home(cluster))


def key_home(cluster) -> Path:
    return cluster.state_dir / sign.KEY_DIR


def reduce(fingerprint: str, carried: bytes) -> bytes:
    """The carried keyring's primary key `fingerprint` alone (with its own valid subkeys: gpg drops what its
    self-signatures do not bind); b"" when it holds no such key."""
    with tempfile.TemporaryDirectory(prefix="corral-gpg-") as tmp:
        home = Path(tmp)
        try:
            sign._gpg(home, "--import-options", "import-minimal", "--import", input=carried)
        except HostToolError:
            pass  # a keyring with one unreadable key still holds the others; what is exported is checked below
        try:
            return sign._gpg(home, "--export-options", "export-minimal", "--export", fingerprint).stdout
        except HostToolError:
            return b""
        finally:
            sign._stop_agent(home)


def pinned_keyring(fingerprint: str, carried: bytes, home: Path | None = None) -> bytes:
    """A binary keyring holding the pinned key alone: from `home` (the state dir's key home) when its key is
    the pinned one, else reduced from the carried keyring. CorralError when neither holds it."""
    pinned = fingerprint.upper()
    if home is not None and sign.fingerprint(home) == pinned:
        ring = sign.export_public(home, pinned)
    else:
        ring = reduce(pinned, carried)
    if sign.primary_fingerprints(ring) != [pinned]:
        carried_fprs = sign.primary_fingerprints(carried)
        raise CorralError(f"the bundle's key file does not hold the key {pinned} (it holds "
                          f"{', '.join(carried_fprs) or 'no OpenPGP key'})", value=pinned,
                          fix="pin the fingerprint `corral bundle build` printed for this bundle, compared with the "
                              "builder's over another channel")
    return ring


@lru_cache(maxsize=4)
def _carried(path: str, mtime: float) -> bytes:
    from corral.bundle.build import KEY_FILE
    with tarfile.open(path, "r:") as tar:
        return tar.extractfile(KEY_FILE).read()


@lru_cache(maxsize=4)
def _ring(path: str, mtime: float, fingerprint: str, home: str) -> bytes:
    return pinned_keyring(fingerprint, _carried(path, mtime), Path(home))


def keyring_for(cluster) -> bytes:
    """The keyring the nodes' apt reads as signed-by= for the spec's bundle: the pinned key alone."""
    from corral.bundle.serve import bundle_path
    fpr = expected_fingerprint(cluster)
    if fpr is None:
        raise CorralError("no pinned key for the bundle: packages.fingerprint is not set and this state dir has "
                          "no bundle key", value="packages.fingerprint",
                          fix="set packages.fingerprint to the key `corral bundle build` printed")
    path = bundle_path(cluster)
    return _ring(str(path), path.stat().st_mtime, fpr, str(key_home(cluster)))
