"""Secrets generated once on the control host and kept in the state dir (dir 0700, files 0600).

Never derived from a password, never printed, never journaled (deploys upload them as file
content, which the engine does not record, or mark them secret). A secret file that is there but
empty, blank or too short (a truncated copy, an editor's leftover) is refused, never pushed to the
nodes. Secrets the admin keeps in files of their own (the LDAP bind password) are read with
admin_secret_text: bounded, refused naming the file when they hold nothing.
"""

from __future__ import annotations

import os
import secrets as _random
from pathlib import Path

from corral.errors import CorralError

MIN_KEY_BYTES = 32  # munge refuses a key under 32 bytes; no random key corral makes is shorter


def _path(state_dir: Path, name: str) -> Path:
    d = Path(state_dir) / "secrets"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d / name


def _refuse(p: Path, what: str) -> CorralError:
    return CorralError(f"secret file is {what}; refusing to push it to the nodes", where=str(p),
                       fix=f"put the real secret back into {p} (from a backup or a node), or remove {p} "
                           "so corral generates a new one and pushes it to every node on the next apply")


def secret_bytes(state_dir: Path, name: str, nbytes: int, min_bytes: int = MIN_KEY_BYTES) -> bytes:
    """The secret `name`, created with `nbytes` random bytes the first time it is asked for; one
    already there must hold at least `min_bytes` bytes (munge: 32)."""
    if nbytes < min_bytes:
        raise ValueError(f"{name}: {nbytes} bytes asked, under the minimum of {min_bytes}")
    p = _path(state_dir, name)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_random.token_bytes(nbytes))
    data = p.read_bytes()
    if not data.strip():
        raise _refuse(p, "empty" if not data else "blank (whitespace only)")
    if len(data) < min_bytes:
        raise _refuse(p, f"{len(data)} bytes long, under the {min_bytes} bytes it needs at least")
    return data


def secret_text(state_dir: Path, name: str, nchars: int = 32) -> str:
    """A random password (URL-safe characters), created once; one already there must not be blank."""
    p = _path(state_dir, name)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_random.token_urlsafe(nchars)[:nchars])
    text = p.read_text().strip()
    if not text:
        raise _refuse(p, "empty" if not p.stat().st_size else "blank (whitespace only)")
    return text


def admin_secret_text(path: Path, what: str, max_bytes: int = 4096) -> str:
    """A secret the admin keeps in a file of their own (e.g. the LDAP bind password): its text less one
    trailing newline; refused, naming the file, when it is missing, empty, blank, not UTF-8 or longer
    than `max_bytes` (a wrong file, not a password). Never part of an error message."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise CorralError(f"cannot read the {what}: {exc.strerror or exc}", where=str(p),
                          fix=f"put the {what} into {p} (readable by the user running corral)") from None
    if len(data) > max_bytes:
        raise CorralError(f"the {what} file is longer than {max_bytes} bytes: not a password file", where=str(p),
                          fix="write the password alone on the file's first line")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise CorralError(f"the {what} file is not UTF-8 text", where=str(p),
                          fix="write the password alone on the file's first line") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text.strip():
        raise CorralError(f"the {what} file is {'empty' if not text else 'blank (whitespace only)'}",
                          where=str(p), fix=f"put the {what} into {p}")
    return text

