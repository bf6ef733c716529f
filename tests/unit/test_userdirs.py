"""node/userdirs.py, the login hook that makes a user's podman storage directory (security review 3, N6): made for
the user who logs in, under a parent only root writes, never handed over when someone else made it first, never for
a system account; it never fails a login. Runs as root here, as on a node (the chown is real)."""

from __future__ import annotations

import json
import os
import pwd

import pytest

from corral.node import userdirs

UID = 4242


@pytest.fixture()
def store(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("makes directories for another uid (root, as on a node)")
    parent = tmp_path / "corral-podman"
    parent.mkdir(mode=0o711)
    config = tmp_path / "user-dirs.json"
    config.write_text(json.dumps({"user_dirs": [{"path": str(parent) + "/{uid}", "clean": False, "shared": False}]}))
    users = {"alice": pwd.struct_passwd(("alice", "x", UID, UID, "", "/home/alice", "/bin/bash")),
             "nobody": pwd.struct_passwd(("nobody", "x", 65534, 65534, "", "/", "/usr/sbin/nologin")),
             "daemon": pwd.struct_passwd(("daemon", "x", 1, 1, "", "/", "/usr/sbin/nologin"))}
    monkeypatch.setattr(userdirs.pwd, "getpwnam", lambda name: users[name])
    return parent, str(config)


def test_her_directory_is_made_at_login_and_hers(store):
    parent, config = store
    assert userdirs.main({"PAM_USER": "alice", "PAM_TYPE": "open_session"}, config) == 0
    st = os.lstat(parent / str(UID))
    assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o777)) == (UID, UID, "0o700")
    assert userdirs.main({"PAM_USER": "alice", "PAM_TYPE": "open_session"}, config) == 0  # the next login: kept


@pytest.mark.attack
def test_a_directory_someone_else_made_first_is_never_handed_over(store, capsys):
    parent, config = store
    os.mkdir(parent / str(UID), 0o777)
    os.chown(parent / str(UID), 4343, 4343)  # a squatter (only root can, under a 0711 root parent)
    assert userdirs.main({"PAM_USER": "alice"}, config) == 0  # the login goes on
    assert os.lstat(parent / str(UID)).st_uid == 4343 and "not a directory of uid 4242" in capsys.readouterr().err


def test_no_directory_for_system_accounts_unknown_users_or_a_closing_session(store):
    parent, config = store
    for env in ({"PAM_USER": "nobody"}, {"PAM_USER": "daemon"}, {"PAM_USER": "mallory"},
                {"PAM_USER": "alice", "PAM_TYPE": "close_session"}):
        assert userdirs.main(env, config) == 0
    assert list(parent.iterdir()) == []
