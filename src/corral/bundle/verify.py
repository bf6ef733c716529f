"""`corral bundle verify`: a bundle is whole and is the one its builder signed, or each problem is named.

Checked, without unpacking anything to disk: every member is a plain file with a plain relative name;
SHA256SUMS carries a good signature by the bundle's key, and that key is the expected one (the spec's
packages.fingerprint, else the key of this state dir, else it is reported as not checked); every file
SHA256SUMS lists is there with that sha256 and size; no file is there that it does not list; the
manifest's packages are files of the bundle. `extract` unpacks a verified bundle for serving.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from corral.bundle import sign
from corral.bundle.build import KEY_FILE, MANIFEST, SUMS
from corral.errors import CorralError


@dataclass
class Checked:
    path: Path
    fingerprint: str | None = None
    expected: str | None = None       # the fingerprint it had to be signed with (None: not checked)
    files: int = 0
    packages: int = 0
    problems: list[str] = field(default_factory=list)
    manifest: dict | None = None
    listed: dict[str, str] = field(default_factory=dict)  # file -> sha256, from the signed SHA256SUMS

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"path": str(self.path), "ok": self.ok, "fingerprint": self.fingerprint,
                "expected_fingerprint": self.expected, "files": self.files, "packages": self.packages,
                "problems": self.problems}


def _safe(name: str) -> bool:
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name


def _hash(tar: tarfile.TarFile, member: tarfile.TarInfo) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    f = tar.extractfile(member)
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
        n += len(block)
    return h.hexdigest(), n


def verify(path: Path, expected: str | None = None) -> Checked:
    out = Checked(Path(path), expected=expected.upper() if expected else None)
    try:
        tar = tarfile.open(path, "r:")
    except (OSError, tarfile.TarError) as e:
        out.problems.append(f"{path}: not a readable bundle ({e})")
        return out
    with tar:
        try:
            members = {m.name: m for m in tar.getmembers()}
        except (OSError, tarfile.TarError) as e:  # a truncated tar ends in the middle of a member
            out.problems.append(f"{path}: the archive is cut short or damaged ({e})")
            return out
        for name, m in sorted(members.items()):
            if not m.isfile() or not _safe(name):
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
        out.fingerprint = sign.key_fingerprint(key)
        bad = sign.verify(key, sums, sig)
        if bad:
            out.problems.append(f"{SUMS}: its signature does not check ({bad})")
        if out.expected and out.fingerprint != out.expected:
            out.problems.append(f"{KEY_FILE}: signed by key {out.fingerprint}, not the expected {out.expected}")
        listed: dict[str, str] = {}
        for line in sums.decode(errors="replace").splitlines():
            digest, _, name = line.partition("  ")
            listed[name] = digest
        for name, digest in sorted(listed.items()):
            m = members.get(name)
            if m is None or not m.isfile():
                out.problems.append(f"{name}: missing (listed in {SUMS})")
                continue
            try:
                got, size = _hash(tar, m)
            except (OSError, tarfile.TarError) as e:
                out.problems.append(f"{name}: cannot be read ({e}): truncated?")
                continue
            if got != digest:
                out.problems.append(f"{name}: sha256 differs from {SUMS} (altered or truncated)")
        for name in sorted(set(members) - set(listed) - {SUMS, f"{SUMS}.sig"}):
            out.problems.append(f"{name}: not listed in {SUMS} (added after signing)")
        out.files, out.listed = len(listed), listed
        raw = read(MANIFEST)
        try:
            out.manifest = json.loads(raw) if raw is not None else None
        except ValueError:
            out.problems.append(f"{MANIFEST}: not JSON")
        if out.manifest is not None:
            out.packages = len(out.manifest.get("packages", []))
            for p in out.manifest.get("packages", []):
                if listed.get(p.get("file")) != p.get("sha256"):
                    out.problems.append(f"{p.get('file')}: the manifest's sha256 is not the one in {SUMS}")
    return out


def expected_fingerprint(cluster) -> str | None:
    """The key a bundle must be signed with: the spec's packages.fingerprint, else this state dir's key."""
    pinned = getattr(cluster.spec.packages, "fingerprint", None)
    if pinned:
        return pinned.upper()
    return sign.fingerprint(cluster.state_dir / sign.KEY_DIR)


def extract(path: Path, checked: Checked, dest: Path) -> Path:
    """Unpack a bundle that verified (checked.ok) into dest (names were checked: plain, relative)."""
    if not checked.ok:
        raise CorralError(f"refusing to use the bundle {path}: " + "; ".join(checked.problems[:3]),
                          fix=f"corral bundle verify {path} names every problem; build or carry it again")
    from corral.digest import sha256_file
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "r:") as tar:
        tar.extractall(dest, filter="data")
    # what was unpacked is what was checked (the file could have changed since): else nothing is kept
    found = {str(p.relative_to(dest)): p for p in dest.rglob("*") if p.is_file()}
    wrong = sorted(n for n in set(found) | set(checked.listed) if n not in (SUMS, f"{SUMS}.sig")
                   and (n not in found or n not in checked.listed or sha256_file(found[n]) != checked.listed[n]))
    if wrong:
        shutil.rmtree(dest, ignore_errors=True)
        raise CorralError(f"the bundle {path} changed while it was unpacked: {', '.join(wrong[:3])}",
                          fix=f"corral bundle verify {path}, then run again")
    return dest
