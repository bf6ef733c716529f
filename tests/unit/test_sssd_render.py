"""render/sssd.py: sssd.conf for identity.ldap (golden files for ldaps with a CA and a bind DN, ldap://
with StartTLS, tls: false, two URIs), values that cannot be written refused (the bind password naming
its file), and `sss` added to Debian 12's /etc/nsswitch.conf, idempotently."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.render.sssd import check_bind_password, nsswitch_with_sss, render_sssd_conf, start_tls
from corral.spec.loader import load_text

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
      - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}
    """)
CA = Path(__file__).resolve().parents[1] / "fixtures" / "ldap" / "ca.pem"


def cluster(tmp_path: Path, ldap: str, homes: str | None = None):
    """A cluster whose spec lives in tmp_path with identity.ldap set to `ldap` (YAML flow mapping); the
    files it names (keys/ca.pem, keys/bind) exist there."""
    (tmp_path / "keys").mkdir(exist_ok=True)
    (tmp_path / "keys" / "ca.pem").write_bytes(CA.read_bytes())
    (tmp_path / "keys" / "bind").write_text("bind-password\n")
    (tmp_path / "keys" / "bind").chmod(0o600)
    text = BASE + "identity:\n" + (f"  homes: {homes}\n" if homes else "") + f"  ldap: {ldap}\n"
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return load_text(text, str(path))


HEAD = """\
# Managed by corral from cluster.yaml - do not edit
[sssd]
services = nss, pam
domains = corral

[nss]
filter_users = _apt, bin, daemon, messagebus, munge, mysql, nobody, prometheus, root, slurm, sshd, sync, sys, systemd-network
filter_groups = _apt, adm, admin, bin, daemon, disk, docker, kmem, kvm, libvirt, lxd, messagebus, munge, mysql, nobody, prometheus, root, shadow, slurm, sshd, staff, sudo, sync, sys, systemd-journal, systemd-network, wheel

[pam]

[domain/corral]
id_provider = ldap
auth_provider = ldap
"""
TAIL = """\
cache_credentials = false
enumerate = false
fallback_homedir = /home/%u
default_shell = /bin/bash
min_id = 10000
max_id = 59999
access_provider = deny
"""


def test_ldaps_with_a_ca_and_a_bind_dn(tmp_path):
    c = cluster(tmp_path, "{uri: ['ldaps://ldap.example.com:636'], base: 'dc=example,dc=com', ca_cert: keys/ca.pem, "
                          "bind_dn: 'cn=reader,ou=services,dc=example,dc=com', bind_password_file: keys/bind}")
    assert render_sssd_conf(c, "s3cret-Pa55", c.nodes[0]) == HEAD + """\
ldap_uri = ldaps://ldap.example.com:636
ldap_search_base = dc=example,dc=com
ldap_schema = rfc2307
ldap_tls_reqcert = demand
ldap_tls_cacert = /etc/sssd/corral-ca.pem
ldap_default_bind_dn = cn=reader,ou=services,dc=example,dc=com
ldap_default_authtok_type = password
ldap_default_authtok = s3cret-Pa55
""" + TAIL
    assert not start_tls(c)


def test_ldap_uri_with_starttls_and_the_system_cas(tmp_path):
    """ldap:// with tls (the default): StartTLS, the certificate checked against the system's CAs;
    anonymous bind: no bind lines, no password needed."""
    c = cluster(tmp_path, "{uri: ['ldap://ldap.example.com'], base: 'dc=example,dc=com'}", homes="/shared/home")
    assert render_sssd_conf(c, None, c.nodes[0]) == HEAD + """\
ldap_uri = ldap://ldap.example.com
ldap_search_base = dc=example,dc=com
ldap_schema = rfc2307
ldap_tls_reqcert = demand
ldap_id_use_start_tls = true
""" + TAIL.replace("/home/%u", "/shared/home/%u")
    assert start_tls(c)


def test_tls_false_is_a_test_directory(tmp_path):
    """tls: false: no certificate checked, no StartTLS, and SSSD's own switch that lets it send the users'
    passwords over the plain connection (it refuses LDAP authentication without TLS otherwise)."""
    c = cluster(tmp_path, "{uri: ['ldap://10.0.0.5:389'], base: 'dc=test', tls: false, "
                          "bind_dn: 'cn=admin,dc=test', bind_password_file: keys/bind}")
    assert render_sssd_conf(c, "admin", c.nodes[0]) == HEAD + """\
ldap_uri = ldap://10.0.0.5:389
ldap_search_base = dc=test
ldap_schema = rfc2307
ldap_tls_reqcert = never
ldap_id_use_start_tls = false
ldap_auth_disable_tls_never_use_in_production = true
ldap_default_bind_dn = cn=admin,dc=test
ldap_default_authtok_type = password
ldap_default_authtok = admin
""" + TAIL
    assert not start_tls(c)


def test_two_uris_tried_in_order(tmp_path):
    """Comma-separated, in the spec's order; an ldap:// URI among them turns StartTLS on (SSSD 2.8 skips
    it on the ldaps:// ones)."""
    c = cluster(tmp_path, "{uri: ['ldaps://ldap1.example.com', 'ldap://[fd00::5]:389'], base: 'dc=example,dc=com', "
                          "ca_cert: keys/ca.pem}")
    text = render_sssd_conf(c, None, c.nodes[0])
    assert "ldap_uri = ldaps://ldap1.example.com,ldap://[fd00::5]:389\n" in text
    assert "ldap_id_use_start_tls = true\n" in text and "ldap_tls_cacert = /etc/sssd/corral-ca.pem\n" in text
    assert "ldap_default_bind_dn" not in text


@pytest.mark.parametrize("password", ["pw\nldap_tls_reqcert = never", "pw\r", "pw\x00", "pw\u2028x", "\x1b[31m",
                                      " pw", "pw\t", ""])
def test_a_password_sssd_conf_cannot_hold_is_refused_naming_its_file(tmp_path, password):
    c = cluster(tmp_path, "{uri: ['ldaps://ldap.example.com'], base: 'dc=example,dc=com', "
                          "bind_dn: 'cn=reader,dc=example,dc=com', bind_password_file: keys/bind}")
    with pytest.raises(CorralError) as err:
        render_sssd_conf(c, password, c.nodes[0])
    assert err.value.where == str(tmp_path / "keys" / "bind")
    assert "/etc/sssd/sssd.conf" in err.value.message
    assert password.strip() == "" or password.strip() not in str(err.value)  # the password is never shown


@pytest.mark.parametrize("password", ["p@ss w0rd", "quote\"d'", "100%u", "#not-a-comment", "ünïcødé", "a=b;c"])
def test_any_one_line_password_is_written_as_it_is(tmp_path, password):
    """ding-libs reads a value to the end of its line: no quoting, no escapes, '#' and ';' are comments only
    at the start of a line, and SSSD expands no '%' in ldap_default_authtok."""
    c = cluster(tmp_path, "{uri: ['ldaps://ldap.example.com'], base: 'dc=example,dc=com', "
                          "bind_dn: 'cn=reader,dc=example,dc=com', bind_password_file: keys/bind}")
    assert f"\nldap_default_authtok = {password}\n" in render_sssd_conf(c, password, c.nodes[0])
    assert check_bind_password(c, password) == password


def test_bind_dn_without_a_password_is_refused(tmp_path):
    c = cluster(tmp_path, "{uri: ['ldaps://ldap.example.com'], base: 'dc=example,dc=com', "
                          "bind_dn: 'cn=reader,dc=example,dc=com', bind_password_file: keys/bind}")
    with pytest.raises(CorralError, match="no bind password"):
        render_sssd_conf(c, None, c.nodes[0])


def test_no_ldap_no_sssd_conf(tmp_path):
    c = load_text(BASE, str(tmp_path / "cluster.yaml"))
    with pytest.raises(CorralError, match="identity.ldap is not set"):
        render_sssd_conf(c, None, c.nodes[0])


def test_homes_at_the_root_make_one_slash(tmp_path):
    c = cluster(tmp_path, "{uri: ['ldaps://ldap.example.com'], base: 'dc=example,dc=com'}", homes="/")
    assert "\nfallback_homedir = /%u\n" in render_sssd_conf(c, None, c.nodes[0])


# Debian 12's /etc/nsswitch.conf as installed (libc-bin's, with libnss-systemd's `systemd`)
DEBIAN12_NSSWITCH = """\
# /etc/nsswitch.conf
#
# Example configuration of GNU Name Service Switch functionality.
# If you have the `glibc-doc-reference' and `info' packages installed, try:
# `info libc "Name Service Switch"' for information about this file.

passwd:         files systemd
group:          files systemd
shadow:         files systemd
gshadow:        files systemd

hosts:          files dns
networks:       files

protocols:      db files
services:       db files
ethers:         db files
rpc:            db files

netgroup:       nis
"""


def test_nsswitch_debian12_gets_sss_after_files_and_systemd():
    new = nsswitch_with_sss(DEBIAN12_NSSWITCH)
    assert new == DEBIAN12_NSSWITCH.replace("passwd:         files systemd\n", "passwd:         files systemd sss\n") \
        .replace("group:          files systemd\n", "group:          files systemd sss\n") \
        .replace("shadow:         files systemd\n", "shadow:         files systemd sss\n")
    assert "gshadow:        files systemd\n" in new and "netgroup:       nis\n" in new
    assert nsswitch_with_sss(new) == new  # idempotent


@pytest.mark.parametrize("line, want", [
    ("passwd: files", "passwd: files sss"),
    ("passwd:\tcompat", "passwd:\tcompat sss"),
    ("passwd: files ldap", "passwd: files sss ldap"),                       # local first, before other sources
    ("passwd: files [NOTFOUND=return] ldap", "passwd: files [NOTFOUND=return] sss ldap"),  # files's action kept
    ("passwd: sss files", "passwd: sss files"),                              # already there: as it is
    ("passwd: files systemd   # a comment", "passwd: files systemd sss   # a comment"),
    ("passwd: files systemd sss", "passwd: files systemd sss"),
])
def test_nsswitch_lines(line, want):
    text = f"{line}\ngroup: files sss\nshadow: files sss\n"
    assert nsswitch_with_sss(text) == f"{want}\ngroup: files sss\nshadow: files sss\n"


def test_nsswitch_missing_lines_are_added_and_a_missing_final_newline_kept_right():
    assert nsswitch_with_sss("hosts: files dns") == (
        "hosts: files dns\npasswd:         files sss\ngroup:          files sss\nshadow:         files sss\n")
    assert nsswitch_with_sss("") == "passwd:         files sss\ngroup:          files sss\nshadow:         files sss\n"
    assert nsswitch_with_sss("gshadow: files\n") == "gshadow: files\n" + (
        "passwd:         files sss\ngroup:          files sss\nshadow:         files sss\n")
