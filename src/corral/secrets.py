"""Secrets generated once on the control host and kept in the state dir (dir 0700, files 0600).

Never derived from a password, never printed, never journaled (deploys upload them as file
content, which the engine does not record, or mark them secret).
"""

from __future__ import annotations

import os
import secrets as _random
from pathlib import Path


def _path(state_dir: Path, name: str) -> Path:
    d = Path(state_dir) / "secrets"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d / name


def secret_bytes(state_dir: Path, name: str, nbytes: int) -> bytes:
    """The secret `name`, created with `nbytes` random bytes the first time it is asked for."""
    p = _path(state_dir, name)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_random.token_bytes(nbytes))
    return p.read_bytes()


def secret_text(state_dir: Path, name: str, nchars: int = 32) -> str:
    """A random password (URL-safe characters), created once."""
    p = _path(state_dir, name)
    if not p.exists():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_random.token_urlsafe(nchars)[:nchars])
    return p.read_text().strip()
