"""The hostlist helpers behind NodeName/NodeAddr lines, partitions and gres.conf."""

from __future__ import annotations

import hostlist
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.render.hw import hostlist as compress
from corral.render.hw import node_runs


@pytest.mark.parametrize(("names", "want"), [
    (["gpu01", "gpu02", "gpu03"], "gpu[01-03]"),
    (["gpu9", "gpu10", "gpu11"], "gpu[9-11]"),
    (["gpu08", "gpu09", "gpu10"], "gpu[08-10]"),
    (["n1", "n3", "n4", "login", "a100-2", "a100-1"], "a100-[1-2],login,n[1,3-4]"),
    (["gpu01", "gpu1"], "gpu[01,1]"),
    (["x"], "x"), (["gpu07"], "gpu07"),
])
def test_hostlist(names, want):
    assert compress(names) == want
    assert sorted(hostlist.expand_hostlist(want)) == sorted(names)


# node names as the spec allows them (spec/hosts.py NAME_RE), numbers inside and at the end, zero-padded or not
NAMES = st.lists(st.from_regex(r"[a-z]{1,3}(-?[0-9]{1,3}){0,2}(-[a-z]{1,2})?", fullmatch=True), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_hostlist_reads_back_as_the_names(names):
    # ours, not python-hostlist's writer (render/hw.py says why); its reader reads ours as exactly the names
    assert sorted(hostlist.expand_hostlist(compress(names))) == sorted(set(names))


def test_runs_pair_names_and_addresses_in_step():
    runs = node_runs([("g1", "10.0.0.254", "a"), ("g2", "10.0.0.255", "a"), ("g3", "10.0.1.0", "a"),
                      ("g4", "10.0.1.1", "a"), ("g5", "10.0.1.2", "b"), ("g6", "fd00::6", "b"),
                      ("g7", "fd00::7", "b"), ("g9", "10.0.1.4", "b"), ("g10", "10.0.1.5", "b")])
    assert [(r.name_text(), r.address_text(), r.attrs) for r in runs] == [
        ("g[1-2]", "10.0.0.[254-255]", "a"), ("g[3-4]", "10.0.1.[0-1]", "a"), ("g5", "10.0.1.2", "b"),
        ("g6", "fd00::6", "b"), ("g7", "fd00::7", "b"), ("g[9-10]", "10.0.1.[4-5]", "b")]
