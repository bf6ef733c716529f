"""The site proxy (spec `proxy:`, render/proxy.py): what each file holds, the marked block of
/etc/environment kept apart from the admin's lines, and the values the types refuse. End to end (apt and a
user's curl through a proxy on the bridge, then the proxy taken away): tests/vcluster/test_bundle.py."""

from __future__ import annotations

import pytest

from corral.errors import CorralError
from corral.render import proxy
from corral.spec.loader import load

SPEC = """name: t
ssh: {user: root}
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
"""
PROXY = "proxy: {http: 'http://proxy.example.com:3128', https: 'http://proxy.example.com:3128', " \
        "no_proxy: [.corp.example.com, 192.168.0.0/16, fd00::1, mirror.corp]}\n"


def cluster(tmp_path, extra: str = PROXY):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + extra)
    return load(f)


def test_environment_block_carries_both_cases_and_the_cluster_in_no_proxy(tmp_path):
    block = proxy.environment_block(cluster(tmp_path))
    skip = ".corp.example.com,192.168.0.0/16,fd00::1,mirror.corp,localhost,127.0.0.1,::1,ctl,10.0.0.10,gpu01,10.0.0.11"
    assert block == ("# BEGIN corral proxy\nhttp_proxy=http://proxy.example.com:3128\n"
                     "HTTP_PROXY=http://proxy.example.com:3128\nhttps_proxy=http://proxy.example.com:3128\n"
                     "HTTPS_PROXY=http://proxy.example.com:3128\n"
                     f"no_proxy={skip}\nNO_PROXY={skip}\n# END corral proxy\n")
    assert proxy.environment_block(cluster(tmp_path, "")) == ""


def test_apt_goes_direct_only_to_host_names_and_says_what_it_cannot_match(tmp_path):
    text = proxy.apt_conf(cluster(tmp_path))
    lines = text.splitlines()
    assert lines[:3] == ["# Managed by corral (spec proxy:)", 'Acquire::http::Proxy "http://proxy.example.com:3128";',
                         'Acquire::https::Proxy "http://proxy.example.com:3128";']
    assert 'Acquire::http::Proxy::mirror.corp "DIRECT";' in lines and 'Acquire::https::Proxy::gpu01 "DIRECT";' in lines
    assert not any("fd00" in line or "192.168" in line for line in lines if not line.startswith("#"))
    assert "::1" in lines[-1] and ".corp.example.com" in lines[-1] and lines[-1].startswith("#")
    assert proxy.apt_conf(cluster(tmp_path, "")) is None


def test_https_only_proxy(tmp_path):
    c = cluster(tmp_path, "proxy: {https: 'https://p.example.com:8443/'}\n")
    assert "http_proxy" not in proxy.environment_block(c).lower().replace("https_proxy", "")
    assert 'Acquire::https::Proxy "https://p.example.com:8443";' in proxy.apt_conf(c)
    assert "Acquire::http::Proxy " not in proxy.apt_conf(c)
    assert proxy.engine_dropin(c).splitlines()[1:] == [
        "[Service]", 'Environment="HTTPS_PROXY=https://p.example.com:8443"',
        'Environment="NO_PROXY=localhost,127.0.0.1,::1,ctl,10.0.0.10,gpu01,10.0.0.11"']


ADMIN = "LANG=C.UTF-8\n# the admin's own\nEDITOR=vim\n"


def test_the_block_is_added_replaced_and_removed_and_the_rest_stays(tmp_path):
    block = proxy.environment_block(cluster(tmp_path))
    added = proxy.merge_block(ADMIN, block)
    assert added == ADMIN + block
    other = proxy.environment_block(cluster(tmp_path, "proxy: {http: 'http://other:8080'}\n"))
    assert proxy.merge_block(added, other) == ADMIN + other
    assert proxy.merge_block(added, "") == ADMIN
    assert proxy.merge_block("", block) == block and proxy.merge_block("", "") == ""


@pytest.mark.parametrize("broken", ["# BEGIN corral proxy\nx=1\n", "# END corral proxy\n",
                                    "# END corral proxy\n# BEGIN corral proxy\n"])
def test_broken_markers_leave_the_file_alone(tmp_path, broken):
    with pytest.raises(CorralError, match="left as it is"):
        proxy.merge_block(ADMIN + broken, proxy.environment_block(cluster(tmp_path)))


@pytest.mark.parametrize("value, message", [
    ("http://user:secret@proxy:3128", "credentials"),
    ("http://proxy:3128/path", "no path"),
    ("http://proxy:3128/?a=1", "no path"),
    ("socks5://proxy:1080", "http://HOST:PORT"),
    ("http://proxy:99999", "port"),
    ("http://pro%78y:3128", "no path, query or %"),
    ("http://proxy:3128\nAcquire::x \"y\"", "http://HOST:PORT"),
    ('http://proxy";x:3128', "http://HOST:PORT"),
])
def test_bad_proxy_urls_are_refused(tmp_path, value, message):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "proxy:\n  http: " + __import__("json").dumps(value) + "\n")
    with pytest.raises(CorralError, match=message):
        load(f)


@pytest.mark.parametrize("entry", ["*", "a b", "host;id", "10.0.0.0/33", "-bad", '"x"'])
def test_bad_no_proxy_entries_are_refused(tmp_path, entry):
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "proxy:\n  http: http://p:3128\n  no_proxy: [" + __import__("json").dumps(entry) + "]\n")
    with pytest.raises(CorralError, match="no_proxy entry"):
        load(f)
