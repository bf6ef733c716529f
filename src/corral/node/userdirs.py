"""A user's node-local directories, made at their login (stdlib only; run as root by pam_exec from the PAM
session stack, through /usr/local/sbin/corral-user-dirs): the templates of /etc/corral/user-dirs.json (podman's
per-user storage, `/var/lib/corral-podman/{uid}`) for PAM_USER, made by jobdirs.make_user_dir, as the prolog makes
them for a job's user. No link is followed and a directory someone else made first is never handed over: the
parent is root's and not writable by others, so nobody can make another user's directory in the first place.
System accounts (uid under 1000, 60000-65535) get none. It never fails a login: what goes wrong is printed (the journal)."""

from __future__ import annotations

import json
import os
import pwd
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobdirs  # noqa: E402 (beside this file: /usr/local/lib/corral)

CONFIG = "/etc/corral/user-dirs.json"
FIRST_USER_UID = 1000
SYSTEM_IDS = range(60000, 65536)  # Debian's for packages and systemd's dynamic users, nobody 65534


def main(env: dict[str, str], config: str = CONFIG) -> int:
    if env.get("PAM_TYPE", "open_session") != "open_session":
        return 0
    try:
        pw = pwd.getpwnam(env.get("PAM_USER", ""))
    except KeyError:
        return 0
    if pw.pw_uid < FIRST_USER_UID or pw.pw_uid in SYSTEM_IDS:
        return 0
    try:
        with open(config) as f:
            dirs = json.load(f)["user_dirs"]
    except (OSError, ValueError, KeyError) as e:
        print(f"corral-user-dirs: {config}: {e}", file=sys.stderr)
        return 0
    for problem in jobdirs.prolog(dirs, pw.pw_uid, pw.pw_gid):
        print(f"corral-user-dirs: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(dict(os.environ)))
