"""Backups are authenticated: manifest.json (which holds every part's size and sha256) carries an
HMAC-SHA256 under a key that is never in a backup. The key is made once per state dir
(secrets/backup.key, 0600, random) by the first `corral backup`; restore reads it from there, or,
on a rebuilt control host whose state dir is gone, from the copy the operator kept (`--key FILE`).
A sha256 alone proves nothing: whoever can write a backup file can recompute it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from corral.errors import CorralError
from corral.secrets import admin_secret_text, secret_text

KEY_NAME = "backup.key"             # under the state dir's secrets/; pack_state leaves it out
KEY_FILE = f"secrets/{KEY_NAME}"
MIN_KEY_CHARS = 32                  # a shorter file is a wrong file, not a key
ALG = "hmac-sha256"


def key_id(key: bytes) -> str:
    """A short public name of the key (not the key): which key authenticated a backup."""
    return hashlib.sha256(b"corral backup key id\0" + key).hexdigest()[:16]


def ensure_key(state_dir: Path) -> bytes:
    """The state dir's key, made (64 random URL-safe characters) the first time."""
    return secret_text(state_dir, KEY_NAME, 64).encode()


def load_key(state_dir: Path, key_file: Path | None = None) -> bytes:
    """The key restore checks with: `key_file` when given, else the state dir's; never made here
    (a new key would authenticate nothing)."""
    path = Path(key_file) if key_file is not None else Path(state_dir) / KEY_FILE
    if key_file is None and not path.exists():
        raise CorralError("this state dir has no backup key, so no backup can be authenticated", where=str(path),
                          fix="give the copy of the backup key kept from the control host that took the backup: "
                              f"`corral restore FILE --key PATH` (the old state dir's {KEY_FILE})")
    text = admin_secret_text(path, "backup key").strip()
    if len(text) < MIN_KEY_CHARS:
        raise CorralError(f"the backup key holds {len(text)} characters, under {MIN_KEY_CHARS}: not a backup key",
                          where=str(path), fix=f"give the {KEY_FILE} of the state dir that took the backup")
    return text.encode()


def seal(manifest: bytes, key: bytes) -> bytes:
    """The authentication member written beside manifest.json."""
    mac = hmac.new(key, manifest, hashlib.sha256).hexdigest()
    return json.dumps({"alg": ALG, "key_id": key_id(key), "mac": mac}).encode()


def check(manifest: bytes, sealed: bytes, key: bytes) -> str | None:
    """None when `sealed` authenticates `manifest` under `key`, else what is wrong (for the error)."""
    try:
        data = json.loads(sealed)
        alg, kid, mac = data["alg"], str(data["key_id"]), str(data["mac"])
    except (ValueError, KeyError, TypeError):
        return "its authentication member is unreadable"
    if alg != ALG:
        return f"it is authenticated with {alg!r}, this corral checks {ALG}"
    if not hmac.compare_digest(mac, hmac.new(key, manifest, hashlib.sha256).hexdigest()):
        if kid != key_id(key):
            return (f"it was authenticated with another key (key id {kid}; the key given has id {key_id(key)}): "
                    "taken from another state dir, or forged")
        return "its manifest does not match its authentication (altered after it was written)"
    return None
