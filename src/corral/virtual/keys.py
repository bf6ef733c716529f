"""SSH keys of a virtual cluster kept on the control host: the cluster's root key (cluster.py) and one
key per example user, <state_dir>/ssh/users/<name>_ed25519, whose public half the default spec lists
in users[].ssh_keys (`corral virtual ssh NODE --user NAME` logs in with it)."""

from __future__ import annotations

from pathlib import Path

from corral.virtual.host import run


def user_key_file(state_dir: Path, user: str) -> Path:
    return state_dir / "ssh" / "users" / f"{user}_ed25519"


def ensure_key(path: Path, comment: str) -> str:
    """The public key line of `path`, generated (ed25519, no passphrase, 0600) when missing."""
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            what=f"generating the SSH key {path.name}")
    return path.with_suffix(".pub").read_text().strip()
