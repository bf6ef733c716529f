"""storage: root-equivalent NFS exports and setuid/device files on shared mounts (security issue, finding 1).
An export option or client list that makes a client's user root on the export (no_root_squash,
anonuid=0/anongid=0, insecure, every address) is a located error unless that export says
`allow_root_equivalent: true` (then warned on every run); mounts are nosuid,nodev unless the spec says
`suid`/`dev`."""

from __future__ import annotations

import pytest

from corral.errors import SpecError
from corral.render.storage import render_mount_unit
from corral.spec.loader import load_text
from corral.spec.rules import spec_warnings

BASE = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, nfs]}
  - {names: "gpu[01-02]", addresses: [10.0.0.11, 10.0.0.12], roles: [compute], gpus: {model: h100, count: 4}}
storage:
  mounts:
    - {path: /home, export: /srv/nfs/home}
  exports:
    - path: /srv/nfs/home
"""


def problems(extra: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_text(BASE + extra, "cluster.yaml")
    return [f"{p.where}: {p.message}" for p in err.value.problems]


@pytest.mark.parametrize("extra, line", [
    ("      options: [rw, sync, all_squash, anonuid=0, anongid=0, no_subtree_check]\n", 10),
    ("      options: [rw, sync, no_root_squash, no_subtree_check]\n", 10),
    ("      options: [rw, sync, root_squash, anonuid=0]\n", 10),
    ("      options: [rw, sync, root_squash, anongid=00]\n", 10),
    ("      options: [rw, insecure, root_squash]\n", 10),
    ("      clients: 0.0.0.0/0\n", 10),
    ("      clients: ::/0\n", 10),
])
def test_root_equivalent_exports_are_located_errors_without_the_flag(extra, line):
    found = problems(extra)
    assert found and all(f.startswith(f"cluster.yaml:{line}:") for f in found), found
    assert any("root" in f for f in found), found


@pytest.mark.parametrize("extra", [
    "      options: [rw, sync, all_squash, anonuid=0, anongid=0]\n      allow_root_equivalent: true\n",
    "      clients: 0.0.0.0/0\n      allow_root_equivalent: true\n",
])
def test_the_flag_allows_them_with_a_warning(extra):
    cluster = load_text(BASE + extra, "cluster.yaml")
    warned = [w for w in spec_warnings(cluster) if "/srv/nfs/home" in w]
    assert warned and "root" in warned[0], spec_warnings(cluster)


def test_a_flag_on_a_safe_export_is_refused_as_meaningless():
    found = problems("      allow_root_equivalent: true\n")
    assert found and found[0].startswith("cluster.yaml:10:"), found


@pytest.mark.parametrize("option", ["no_root_squash", "anonuid=0", "anongid=0", "insecure", "anonuid=000"])
def test_every_root_equivalent_option_is_known(option):
    # the list the rule reads: a spelling exportfs accepts for the same thing is the same option
    from corral.spec.models_storage import ROOT_EQUIVALENT_OPTIONS, root_equivalent
    assert root_equivalent([option]) == [option]
    assert set(ROOT_EQUIVALENT_OPTIONS) >= {"no_root_squash", "insecure"}


def test_mounts_are_nosuid_nodev_by_default_and_on_request_only_otherwise():
    cluster = load_text(BASE, "cluster.yaml")
    unit = render_mount_unit(cluster, cluster.spec.storage.mounts[0])
    options = next(line for line in unit.splitlines() if line.startswith("Options=")).split("=", 1)[1].split(",")
    assert {"nosuid", "nodev"} <= set(options), unit


def test_explicit_options_get_nosuid_nodev_unless_they_say_suid_or_dev():
    text = BASE.replace("{path: /home, export: /srv/nfs/home}",
                        "{path: /home, export: /srv/nfs/home, options: [rw, hard]}")
    cluster = load_text(text, "cluster.yaml")
    assert cluster.spec.storage.mounts[0].mount_options() == ["rw", "hard", "nosuid", "nodev"]
    text = BASE.replace("{path: /home, export: /srv/nfs/home}",
                        "{path: /home, export: /srv/nfs/home, options: [rw, hard, suid, dev]}")
    cluster = load_text(text, "cluster.yaml")
    assert cluster.spec.storage.mounts[0].mount_options() == ["rw", "hard", "suid", "dev"]
    assert any("/home" in w and "suid" in w for w in spec_warnings(cluster)), spec_warnings(cluster)


def test_contradictory_mount_options_are_refused():
    text = BASE.replace("{path: /home, export: /srv/nfs/home}",
                        "{path: /home, export: /srv/nfs/home, options: [rw, suid, nosuid]}")
    with pytest.raises(SpecError) as err:
        load_text(text, "cluster.yaml")
    assert any(p.where.startswith("cluster.yaml:7:") for p in err.value.problems), err.value.problems


# the class: whatever options and clients a spec gives, an exports line that makes a client's user root
# (read as exportfs reads it: nfs-utils parses anonuid/anongid with strtoul into a 32-bit id) is written
# only for an export that says allow_root_equivalent
import ctypes  # noqa: E402

from hypothesis import given, settings, strategies as st  # noqa: E402

from corral.render.storage import render_exports  # noqa: E402

_libc = ctypes.CDLL(None)
_libc.strtoul.restype = ctypes.c_ulong
_libc.strtoul.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]


def _exportfs_id(text: str) -> int | None:
    end = ctypes.c_char_p()
    raw = text.encode()
    value = _libc.strtoul(raw, ctypes.byref(end), 10)
    if not raw or end.value:  # exportfs: "bad anonuid" unless the whole value is a number
        return None
    return value & 0xFFFFFFFF


def _root_in_line(line: str) -> bool:
    for client in line.split()[1:]:
        address, _, options = client.partition("(")
        for option in options.rstrip(")").split(","):
            key, _, value = option.partition("=")
            if option in ("no_root_squash", "insecure") or (key in ("anonuid", "anongid")
                                                           and _exportfs_id(value) == 0):
                return True
        if address in ("0.0.0.0/0", "::/0", "8.0.0.0/8"):
            return True
    return False


IDS = st.sampled_from(["0", "00", "+0", "-0", "4294967296", "-4294967296", "1000", "65534", "64030", "18446744073709551616"])
OPTION = st.one_of(st.sampled_from(["rw", "ro", "sync", "root_squash", "all_squash", "no_subtree_check",
                                    "no_root_squash", "insecure", "secure", "no_all_squash"]),
                   st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["anonuid", "anongid"]), IDS))


@settings(max_examples=150, deadline=None)
@given(options=st.lists(OPTION, min_size=1, max_size=6, unique=True),
       clients=st.sampled_from(["cluster", "10.0.0.0/24", "0.0.0.0/0", "::/0", "8.0.0.0/8", "fd00::/64"]),
       flag=st.booleans())
def test_no_root_equivalent_exports_line_without_the_flag(options, clients, flag):
    opts = [o for o in options if o not in ("secure", "no_all_squash")] or ["rw"]
    text = BASE + f"      clients: {clients}\n      options: [{', '.join(opts)}]\n" + (
        "      allow_root_equivalent: true\n" if flag else "")
    try:
        cluster = load_text(text, "cluster.yaml")
    except SpecError:
        return
    lines = [line for line in render_exports(cluster).splitlines() if line.startswith("/srv/nfs/home")]
    assert not any(_root_in_line(line) for line in lines) or flag, (options, clients, lines)
