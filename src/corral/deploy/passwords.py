"""users[].password: a random password corral makes once per user on the control host (state dir secrets,
0600), hashed there (SHA-512 crypt, `openssl passwd -6`, the password on its stdin) and set on login
nodes with `chpasswd -e` reading a 0600 file corral uploads and removes: never in argv, the journal or a
diff. Whether a node already has it is asked without reading the hash back: the node answers with the
sha256 of its shadow field, compared with that of corral's hash. For logins through PAM that are not SSH
keys: the notebook hub's (docs/components/notebooks.md)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from pyinfra import host
from pyinfra.api import FactBase, deploy, operation

from corral import secrets
from corral.deploy import operations
from corral.engine.notes import annotate
from corral.engine.shell import q, sh
from corral.errors import CorralError

STAGED = "/run/corral-chpasswd"


def _hash_file(state_dir: Path, name: str) -> Path:
    return Path(state_dir) / "secrets" / f"password-{name}.crypt"


def password_hash(state_dir: Path, name: str) -> str:
    """The user's crypt(3) hash: made again only when the password file changed (its sha256 is kept with it)."""
    password = secrets.secret_text(state_dir, f"password-{name}", 24)
    digest = hashlib.sha256(password.encode()).hexdigest()
    path = _hash_file(state_dir, name)
    if path.exists():
        kept, _, crypt = path.read_text().strip().partition(" ")
        if kept == digest and crypt.startswith("$6$"):
            return crypt
    try:
        out = subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=password + "\n", capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CorralError(f"hashing {name}'s password failed: {exc}", fix="install openssl on the control host") from None
    crypt = out.stdout.strip()
    if out.returncode != 0 or not crypt.startswith("$6$"):
        raise CorralError(f"hashing {name}'s password failed: openssl exited {out.returncode}",
                          fix="install openssl on the control host") from None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{digest} {crypt}\n")
    return crypt


class ShadowDigests(FactBase):
    """user -> sha256 of the user's shadow password field ("" for a user without an entry)."""

    def command(self, names: list[str]) -> str:
        return "; ".join(f"printf '%s ' {q(n)}; getent shadow {q(n)} | cut -d: -f2 | tr -d '\\n' | sha256sum"
                         for n in names)

    def process(self, output: list[str]) -> dict[str, str]:
        out = {}
        for line in output:
            f = line.split()
            if len(f) >= 2:
                out[f[0]] = f[1]
        return out


def _digest(crypt: str) -> str:
    return hashlib.sha256(crypt.encode()).hexdigest()


@operation()
def password_set(user: str, crypt: str):
    """The user's shadow field is corral's hash: nothing to do; else set it (chpasswd -e from a 0600 file)."""
    have = (host.get_fact(ShadowDigests, names=[user]) or {}).get(user)
    if have == _digest(crypt):
        host.noop(f"{user}'s password set")
        return
    annotate(disruption="none", diff=f"{user}: password set (corral's, from the state dir; not shown)\n")
    line = f"{user}:{crypt}\n".encode()  # shell-ok: chpasswd's input file, never a command line
    yield from operations.install_commands(STAGED, line, "600", "root", "root")
    yield sh(f"chpasswd -e < {STAGED}; rc=$?; rm -f {STAGED}; exit $rc")


@deploy("passwords")
def passwords() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if "login" not in node.roles:
        return
    for u in cluster.spec.users:
        if u.password:
            password_set(name=f"password of {u.name}", user=u.name, crypt=password_hash(cluster.state_dir, u.name))
