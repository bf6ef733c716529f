"""A bundle put to use: verified against the pinned signer, refused when older than the newest this state
dir has used (bundle/serial.py), then unpacked once into the state dir (bundle/<digest>/, keyed by the
digest of its signed SHA256SUMS) for the repository server. Nothing of an unverified bundle is unpacked;
a spec naming no signer it can check against is refused. The keyring handed on for the nodes' apt is the
pinned key alone (bundle/trust.py), never the file the bundle carries."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

from corral.bundle import serial
from corral.bundle.build import SUMS
from corral.bundle.trust import expected_fingerprint, key_home
from corral.bundle.verify import Checked, unpack_verified, verify
from corral.errors import CorralError


def bundle_path(cluster) -> Path:
    return (cluster.base_dir / Path(cluster.spec.packages.bundle).expanduser()).resolve()


def existing_bundle(cluster) -> Path:
    """The spec's bundle file, or a CorralError saying it is not there."""
    path = bundle_path(cluster)
    if not path.is_file():
        raise CorralError(f"packages.bundle: {path} does not exist", value=str(path),
                          fix="carry the file `corral bundle build` wrote to this host, or correct the path")
    return path


def checked_bundle(cluster) -> tuple[Path, Checked]:
    """The spec's bundle, verified against the pinned key; a CorralError naming its problems."""
    path = existing_bundle(cluster)
    expected = expected_fingerprint(cluster)
    if expected is None:
        raise CorralError(f"nothing to check the signer of {path} against: packages.fingerprint is not set and "
                          "this state dir has no bundle key", value="packages.fingerprint",
                          fix="set packages.fingerprint to the key `corral bundle build` printed (compare it with "
                              "the builder's over another channel)")
    checked = verify(path, expected, key_home(cluster))
    if not checked.ok:
        raise CorralError(f"refusing the bundle {path}: " + "; ".join(checked.problems[:3])
                          + (f" (and {len(checked.problems) - 3} more)" if len(checked.problems) > 3 else ""),
                          value=str(path), fix=f"`corral bundle verify {path}` names every problem; build or carry "
                                               "it again")
    return path, checked


def prepare(cluster) -> tuple[Path, bytes]:
    """(the repository directory to serve, the pinned key alone as a keyring for the nodes' signed-by=)."""
    path, checked = checked_bundle(cluster)
    serial.check(cluster.state_dir, checked.serial, path)
    with tarfile.open(path, "r:") as tar:
        digest = hashlib.sha256(tar.extractfile(SUMS).read()).hexdigest()[:16]
    dest = cluster.state_dir / "bundle" / digest
    if not (dest / ".complete").is_file():
        shutil.rmtree(dest, ignore_errors=True)
        unpack_verified(path, checked, dest)
        (dest / ".complete").write_text(str(path) + "\n")
    for old in (cluster.state_dir / "bundle").iterdir():  # only the bundle in use is kept unpacked
        if old != dest and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    serial.remember(cluster.state_dir, checked.serial, path)
    return dest / "repo", checked.keyring


def carried_image(cluster, wanted: str) -> Path | None:
    """The verified bundle's base image for the virtual cluster (--with-virtual), unpacked with the rest:
    None when it carries none; a CorralError when it carries another recipe's image than this corral's."""
    unpacked = prepare(cluster)[0].parent
    images = sorted((unpacked / "virtual").glob("*.tar")) if (unpacked / "virtual").is_dir() else []
    if not images:
        return None
    match = unpacked / "virtual" / f"{wanted}.tar"
    if not match.is_file():
        raise CorralError(f"the bundle carries the node base image {images[0].stem}, but this corral builds its "
                          f"nodes from {wanted} (another image recipe)", value=str(bundle_path(cluster)),
                          fix="build the bundle with the same corral version as the one on this host "
                              "(corral bundle build --with-virtual)")
    return match
