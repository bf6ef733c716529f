"""`corral bundle verify`: a bundle is whole and is the one its builder signed, or each problem is named.

Checked, without unpacking anything to disk: every member is a plain file with a clean relative name that
appears once; the carried key file holds one key; SHA256SUMS and repo/InRelease carry a good signature by
the pinned key (`--fingerprint`, the spec's packages.fingerprint, else this state dir's key), checked with
a keyring holding that key alone (bundle/trust.py); with no key to compare that is a problem, never an
"ok"; every file SHA256SUMS lists is there with that sha256; no file is there that it does not list; the
manifest's packages are files of the bundle; each carried image's blobs are files of its layout named by
their sha256, listed with it and unaltered (bundle/oci_layout.py: a problem names the image); the bundle
has not expired (its signed valid_until).
`unpack_verified` unpacks a verified bundle for serving (bundle/untar.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import time
from collections import Counter
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

from corral.bundle import sign
from corral.bundle.build import KEY_FILE, MANIFEST, SUMS
from corral.bundle import trust
from corral.bundle.trust import pinned_keyring
from corral.bundle.untar import clean_name, unpack
from corral.errors import CorralError

expected_fingerprint = trust.expected_fingerprint  # where checks/doctor.py looks for it
INRELEASE = "repo/InRelease"
UNCHECKED = ("authenticity not checked: no key to compare the signer with (pass --fingerprint FPR, or -f SPEC "
             "whose packages.fingerprint or state dir key is the builder's)")


@dataclass
class Checked:
    path: Path
    fingerprint: str | None = None    # the key whose good signatures were checked
    expected: str | None = None       # the fingerprint it had to be signed with (None: not checked)
    files: int = 0
    packages: int = 0
    images: int = 0
    problems: list[str] = field(default_factory=list)
    manifest: dict | None = None
    listed: dict[str, str] = field(default_factory=dict)  # file -> sha256, from the signed SHA256SUMS
    keyring: bytes = b""              # the pinned key alone: what the nodes' apt trusts (signed-by=)
    carried: list[str] = field(default_factory=list)  # the primary keys the bundle's key file holds

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def serial(self) -> int:
        value = (self.manifest or {}).get("serial")
        return value if isinstance(value, int) else 0

    def to_json(self) -> dict:
        return {"path": str(self.path), "ok": self.ok, "fingerprint": self.fingerprint,
                "expected_fingerprint": self.expected, "carried_keys": self.carried, "serial": self.serial,
                "files": self.files, "packages": self.packages, "images": self.images, "problems": self.problems}


def _hash(tar: tarfile.TarFile, member: tarfile.TarInfo) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    f = tar.extractfile(member)
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
        n += len(block)
    return h.hexdigest(), n


def verify(path: Path, expected: str | None = None, key_home: Path | None = None) -> Checked:
    """`expected`: the pinned fingerprint; `key_home`: this state dir's key home (its key is exported when it
    is the pinned one, rather than taken from the bundle)."""
    out = Checked(Path(path), expected=expected.upper() if expected else None)
    try:
        tar = tarfile.open(path, "r:")
    except (OSError, tarfile.TarError) as e:
        out.problems.append(f"{path}: not a readable bundle ({e})")
        return out
    with tar:
        try:
            all_members = tar.getmembers()
        except (OSError, tarfile.TarError) as e:  # a truncated tar ends in the middle of a member
            out.problems.append(f"{path}: the archive is cut short or damaged ({e})")
            return out
        members = {m.name: m for m in all_members}
        for name, n in sorted(Counter(m.name for m in all_members).items()):
            if n > 1:  # tar and tarfile take the last copy: it could shadow the one a reader checked
                out.problems.append(f"{name}: appears {n} times in the archive (refused)")
        for name, m in sorted(members.items()):
            if not m.isfile() or not clean_name(name) or "\\" in name:  # a bundle's own names have none
                out.problems.append(f"{name}: not a plain file with a relative name (refused)")

        def read(name: str) -> bytes | None:
            m = members.get(name)
            return tar.extractfile(m).read() if m is not None and m.isfile() else None
        sums, sig, key = read(SUMS), read(f"{SUMS}.sig"), read(KEY_FILE)
        for name, data in ((SUMS, sums), (f"{SUMS}.sig", sig), (KEY_FILE, key)):
            if data is None:
                out.problems.append(f"{name}: missing")
        if sums is None or sig is None or key is None:
            return out
        _check_signatures(out, sums, sig, key, read(INRELEASE), key_home)
        listed: dict[str, str] = {}
        altered: set[str] = set()  # listed files missing or not as listed
        for line in sums.decode(errors="replace").splitlines():
            digest, _, name = line.partition("  ")
            listed[name] = digest
        for name, digest in sorted(listed.items()):
            m = members.get(name)
            if m is None or not m.isfile():
                altered.add(name)
                out.problems.append(f"{name}: missing (listed in {SUMS})")
                continue
            try:
                got, size = _hash(tar, m)
            except (OSError, tarfile.TarError) as e:
                altered.add(name)
                out.problems.append(f"{name}: cannot be read ({e}): truncated?")
                continue
            if got != digest:
                altered.add(name)
                out.problems.append(f"{name}: sha256 differs from {SUMS} (altered or truncated)")
        for name in sorted(set(members) - set(listed) - {SUMS, f"{SUMS}.sig"}):
            out.problems.append(f"{name}: not listed in {SUMS} (added after signing)")
        out.files, out.listed = len(listed), listed
        raw = read(MANIFEST)
        try:
            out.manifest = json.loads(raw) if raw is not None else None
        except ValueError:
            out.problems.append(f"{MANIFEST}: not JSON")
        if isinstance(out.manifest, dict):
            _check_manifest(out, listed, altered)
    return out


def _check_signatures(out: Checked, sums: bytes, sig: bytes, key: bytes, inrelease: bytes | None,
                      key_home: Path | None) -> None:
    """SHA256SUMS.sig and InRelease by the pinned key alone; without a pin, checked against the carried key
    (integrity only) and said to be unchecked."""
    out.carried = sign.primary_fingerprints(key)
    if len(out.carried) != 1:
        out.problems.append(f"{KEY_FILE}: holds {len(out.carried)} keys ({', '.join(out.carried) or 'none'}); a "
                            "bundle carries its signer's key alone")
    pin = out.expected
    if pin is None:
        out.problems.insert(0, UNCHECKED)
        pin = out.carried[0] if len(out.carried) == 1 else None
    elif pin not in out.carried:
        out.problems.append(f"{KEY_FILE}: signed by key {', '.join(out.carried) or 'none'}, not the expected {pin}")
    if pin is None:
        return
    try:
        ring = pinned_keyring(pin, key, key_home)
    except CorralError as e:
        out.problems.append(f"{KEY_FILE}: {e.message}")
        return
    bad = sign.verify(ring, sums, sig, fingerprint=pin)
    if bad:
        out.problems.append(f"{SUMS}: its signature does not check ({bad})")
    bad_release = sign.verify(ring, None, inrelease, fingerprint=pin) if inrelease is not None else "missing"
    if bad_release:
        out.problems.append(f"{INRELEASE}: its signature does not check ({bad_release})")
    if not bad and not bad_release:
        out.fingerprint, out.keyring = pin, ring


def _check_manifest(out: Checked, listed: dict[str, str], altered: set[str]) -> None:
    from corral.bundle.oci_layout import problems as image_problems
    out.packages = len(out.manifest.get("packages", []))
    images = out.manifest.get("images", [])
    out.images = len(images) if isinstance(images, list) else 0
    for item in images if isinstance(images, list) else [images]:
        out.problems += image_problems(item, listed, altered)
    for p in out.manifest.get("packages", []):
        if listed.get(p.get("file")) != p.get("sha256"):
            out.problems.append(f"{p.get('file')}: the manifest's sha256 is not the one in {SUMS}")
    until = out.manifest.get("valid_until")
    if isinstance(until, int) and until < time.time():
        out.problems.append(f"{MANIFEST}: the bundle expired on {formatdate(until, usegmt=True)} (apt on the "
                            "nodes refuses its InRelease after that): build a new one")


def unpack_verified(path: Path, checked: Checked, dest: Path) -> Path:
    """Unpack a bundle that verified (checked.ok) into dest (bundle/untar.py checks every member again)."""
    if not checked.ok:
        raise CorralError(f"refusing to use the bundle {path}: " + "; ".join(checked.problems[:3]),
                          fix=f"corral bundle verify {path} names every problem; build or carry it again")
    from corral.digest import sha256_file
    unpack(path, dest)
    # what was unpacked is what was checked (the file could have changed since): else nothing is kept
    found = {str(p.relative_to(dest)): p for p in dest.rglob("*") if p.is_file()}
    wrong = sorted(n for n in set(found) | set(checked.listed) if n not in (SUMS, f"{SUMS}.sig")
                   and (n not in found or n not in checked.listed or sha256_file(found[n]) != checked.listed[n]))
    if wrong:
        shutil.rmtree(dest, ignore_errors=True)
        raise CorralError(f"the bundle {path} changed while it was unpacked: {', '.join(wrong[:3])}",
                          fix=f"corral bundle verify {path}, then run again")
    return dest
