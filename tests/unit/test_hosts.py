"""Hostlist and address-range expansion (corral.spec.hosts)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.spec.hosts import MAX_EXPANSION, RangeError, compress_names, expand_addresses, expand_names

# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "names"), [
    ("ctl1", ["ctl1"]),
    ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
    ("gpu[1-3]", ["gpu1", "gpu2", "gpu3"]),
    ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
    ("gpu[1-2,5]", ["gpu1", "gpu2", "gpu5"]),
    ("ctl1,login1,gpu[1-2]", ["ctl1", "login1", "gpu1", "gpu2"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("node-a,node-b", ["node-a", "node-b"]),
    ("[1-2]", ["1", "2"]),
    ("gpu1,,gpu2", ["gpu1", "gpu2"]),          # an empty item is skipped
    ("gpu[2-3],gpu1", ["gpu2", "gpu3", "gpu1"]),  # order is kept, not sorted
])
def test_expand_names(expr, names):
    assert expand_names(expr) == names


def test_expand_names_drops_duplicates_unless_unique():
    assert expand_names("gpu1,gpu[1-2]") == ["gpu1", "gpu2"]
    with pytest.raises(RangeError) as err:
        expand_names("gpu1,gpu[1-2]", unique=True)
    assert str(err.value) == "hostlist 'gpu1,gpu[1-2]' names 'gpu1' more than once"
    assert expand_names("gpu[1-2]", unique=True) == ["gpu1", "gpu2"]


@pytest.mark.parametrize(("expr", "message"), [
    ("gpu[01-02", "bad hostlist 'gpu[01-02': unbalanced brackets"),
    ("gpu01]", "bad hostlist 'gpu01]': unbalanced brackets"),
    ("gpu[[1-2]]", "bad hostlist 'gpu[[1-2]]': nested brackets"),
    ("gpu[a-b]", "bad hostlist 'gpu[a-b]': bad range"),
    ("gpu[1-2-3]", "bad hostlist 'gpu[1-2-3]': bad range"),
    ("gpu[]", "bad hostlist 'gpu[]': bad range"),
    ("gpu[5-1]", "bad hostlist 'gpu[5-1]': start > stop"),
    ("gpu[1-99999999]", "bad hostlist 'gpu[1-99999999]': range too large"),
    ("a[1-60000],b[1-60000]", f"hostlist 'a[1-60000],b[1-60000]' expands to more than {MAX_EXPANSION} items"),
    ("", "hostlist '' names no host"),
    (",", "hostlist ',' names no host"),
    ("GPU01", "'GPU01' is not a valid node name (lowercase letters, digits, '-')"),
    ("gpu 1", "'gpu 1' is not a valid node name (lowercase letters, digits, '-')"),
    ("gpu_1", "'gpu_1' is not a valid node name (lowercase letters, digits, '-')"),
    ("-gpu", "'-gpu' is not a valid node name (lowercase letters, digits, '-')"),
    ("gpu-", "'gpu-' is not a valid node name (lowercase letters, digits, '-')"),
    ("a" * 64, f"'{'a' * 64}' is not a valid node name (lowercase letters, digits, '-')"),
    ("gpu.example.com", "'gpu.example.com' is not a valid node name (lowercase letters, digits, '-')"),
])
def test_expand_names_errors(expr, message):
    with pytest.raises(RangeError) as err:
        expand_names(expr)
    assert str(err.value) == message


def test_range_error_is_a_value_error():
    assert issubclass(RangeError, ValueError)


def test_expand_names_at_the_limit():
    assert len(expand_names(f"n[1-{MAX_EXPANSION}]")) == MAX_EXPANSION


# --- compress ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("names", "expr"), [
    (["gpu01", "gpu02", "gpu03"], "gpu[01-03]"),
    (["gpu01", "gpu02", "gpu04"], "gpu[01-02,04]"),
    (["ctl1"], "ctl1"),
    (["gpu01", "gpu02", "ctl1"], "ctl1,gpu[01-02]"),
    ([], ""),
])
def test_compress_names(names, expr):
    assert compress_names(names) == expr


def test_compress_names_rejects_hostlist_syntax():
    with pytest.raises(RangeError) as err:
        compress_names(["a,b"])
    assert str(err.value) == "cannot write ['a,b'] as a hostlist: forbidden character"


NODE_NAME = st.from_regex(r"\A[a-z]{1,4}[0-9]{0,3}\Z")


@settings(max_examples=200, deadline=None)
@given(st.lists(NODE_NAME, min_size=1, max_size=30, unique=True))
def test_compress_then_expand_gives_the_same_names(names):
    assert sorted(expand_names(compress_names(names))) == sorted(names)


# --- addresses ---------------------------------------------------------------------------------

THREE = ["10.0.0.11", "10.0.0.12", "10.0.0.13"]


@pytest.mark.parametrize("spec", [
    THREE,
    "10.0.0.[11-13]",
    "10.0.0.11-13",
    "10.0.0.11 - 13",
    "10.0.0.11-10.0.0.13",
    "10.0.0.11,10.0.0.12,10.0.0.13",
    " 10.0.0.11, 10.0.0.12 ,10.0.0.13 ",
    "10.0.0.[11-12],10.0.0.13",
])
def test_expand_addresses_forms(spec):
    assert expand_addresses(spec) == THREE


@pytest.mark.parametrize(("spec", "addresses"), [
    ("10.0.0.5", ["10.0.0.5"]),
    (["10.0.0.5"], ["10.0.0.5"]),
    ([], []),
    ("10.0.0.254-10.0.1.1", ["10.0.0.254", "10.0.0.255", "10.0.1.0", "10.0.1.1"]),
    ("fd00::[1-2]", ["fd00::1", "fd00::2"]),
    ("fd00::1-fd00::3", ["fd00::1", "fd00::2", "fd00::3"]),
    (["fd00:0::1"], ["fd00::1"]),                 # normalised
    ("10.0.0.[1-2],10.0.0.1", ["10.0.0.1", "10.0.0.2", "10.0.0.1"]),  # duplicates kept (checked later)
])
def test_expand_addresses_more(spec, addresses):
    assert expand_addresses(spec) == addresses


@pytest.mark.parametrize(("spec", "message"), [
    ("10.0.0.13-11", "address range '10.0.0.13-11' ends before it starts"),
    ("10.0.0.13-10.0.0.11", "address range '10.0.0.13-10.0.0.11' ends before it starts"),
    ("10.0.0.11-x", "bad address range '10.0.0.11-x'"),
    ("10.0.0.11-", "bad address range '10.0.0.11-'"),
    ("fd00::1-3", "bad address range 'fd00::1-3'"),
    ("10.0.0.1-fd00::1", "address range '10.0.0.1-fd00::1' mixes IPv4 and IPv6"),
    ("10.0.0.250-300", "'10.0.0.300' is not an IP address"),
    ("-5", "'' is not an IP address"),
    ("10.0.0.0-10.255.255.255", "address range '10.0.0.0-10.255.255.255' is too large"),
    ("10.0.0.[11-12", "bad address list '10.0.0.[11-12': unbalanced brackets"),
    ("10.0.0.[1-x]", "bad address list '10.0.0.[1-x]': bad range"),
    ("10.[0-255].[0-255].[0-255]", "bad address list '10.[0-255].[0-255].[0-255]': results too large"),
    ("10.0.[0-255].[0-255],10.1.[0-255].[0-255]",
     f"address list '10.0.[0-255].[0-255],10.1.[0-255].[0-255]' expands to more than {MAX_EXPANSION} items"),
    ("10.0.0.[250-300]", "'10.0.0.256' is not an IP address"),
    ("gpu01", "'gpu01' is not an IP address"),
    ("", "'' is not an IP address"),
    ("10.0.0.1,,10.0.0.2", "'' is not an IP address"),
    (["10.0.0.1", "nope"], "'nope' is not an IP address"),
    (["10.0.0.1/24"], "'10.0.0.1/24' is not an IP address"),
])
def test_expand_addresses_errors(spec, message):
    with pytest.raises(RangeError) as err:
        expand_addresses(spec)
    assert str(err.value) == message


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(st.text(max_size=20), max_size=5),
                 st.text(alphabet="0123456789.-[],: abcdef", max_size=40)))
def test_expansion_raises_only_range_error(text):
    for fn in (expand_names, expand_addresses):
        if fn is expand_names and not isinstance(text, str):
            continue
        try:
            out = fn(text)
        except RangeError as exc:
            assert "\n" not in str(exc)
        else:
            assert isinstance(out, list) and all(isinstance(x, str) for x in out)
            assert len(out) <= MAX_EXPANSION
