"""spec/rules_ldap.py: identity.ldap's cross-checks (bind_dn with bind_password_file, files that exist
and can be read, a PEM CA), located at the key with the resolved path; ldap_warnings; and how the bind
password file is read (secrets.admin_secret_text, deploy/sssd.py)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from corral.deploy.sssd import bind_password, read_ca
from corral.errors import CorralError, SpecError
from corral.secrets import admin_secret_text
from corral.spec.loader import Locator, load_text, parse_yaml
from corral.spec.rules_ldap import check_ldap, ldap_file, ldap_warnings

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
      - {names: gpu01, addresses: [10.0.0.11], roles: [compute], gpus: {model: h100, count: 4}}
    identity:
      ldap:
        uri: [ldaps://ldap.example.com]
        base: dc=example,dc=com
    """)
CA = Path(__file__).resolve().parents[1] / "fixtures" / "ldap" / "ca.pem"


def problems(tmp_path: Path, extra: str, base: str = BASE) -> list[str]:
    """check_ldap's problems as `where: message` (whether or not spec/rules.py runs it at load)."""
    text = base + textwrap.indent(textwrap.dedent(extra), "    ")
    path = str(tmp_path / "cluster.yaml")
    try:
        cluster = load_text(text, path)
    except SpecError as err:
        return [f"{p.where}: {p.message}" for p in err.problems]
    return [f"{p.where}: {p.message}" for p in check_ldap(cluster, Locator(path, parse_yaml(text, path)))]


def files(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "ca.pem").write_bytes(CA.read_bytes())
    (tmp_path / "keys" / "bind").write_text("s3cret\n")
    (tmp_path / "keys" / "bind").chmod(0o600)


def test_files_that_exist_pass(tmp_path):
    files(tmp_path)
    assert problems(tmp_path, """\
        ca_cert: keys/ca.pem
        bind_dn: cn=reader,dc=example,dc=com
        bind_password_file: keys/bind
        """) == []


def test_missing_files_are_located_with_their_resolved_path(tmp_path):
    found = problems(tmp_path, """\
        ca_cert: keys/ca.pem
        bind_dn: cn=reader,dc=example,dc=com
        bind_password_file: ../secrets/bind
        """)
    where = str(tmp_path / "cluster.yaml")
    assert found == [f"{where}:9:14: CA certificate {tmp_path / 'keys' / 'ca.pem'}: no such file",
                     f"{where}:11:25: bind password file {tmp_path.parent / 'secrets' / 'bind'}: no such file"]


def test_bind_dn_without_a_password_file_and_the_reverse(tmp_path):
    files(tmp_path)
    where = str(tmp_path / "cluster.yaml")
    assert problems(tmp_path, "bind_dn: cn=reader,dc=example,dc=com\n") == [
        f"{where}:9:14: bind_dn without bind_password_file: they come together"]
    assert problems(tmp_path, "bind_password_file: keys/bind\n") == [
        f"{where}:9:25: bind_password_file without bind_dn: they come together"]


def test_tls_without_a_ca_uses_the_system_cas(tmp_path):
    assert problems(tmp_path, "tls: true\n") == []


def test_a_ca_that_is_not_pem_a_directory_or_unreadable_is_refused(tmp_path):
    files(tmp_path)
    (tmp_path / "keys" / "ca.der").write_bytes(b"\x30\x82\x01\x94")
    assert problems(tmp_path, "ca_cert: keys/ca.der\n")[0].endswith(
        "holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    assert problems(tmp_path, "ca_cert: keys\n")[0].endswith(f"{tmp_path / 'keys'}: not a regular file")
    if os.geteuid() != 0:  # root reads any file
        (tmp_path / "keys" / "ca.pem").chmod(0)
        assert problems(tmp_path, "ca_cert: keys/ca.pem\n")[0].endswith("not readable by this user")


def test_a_uri_listed_twice(tmp_path):
    base = BASE.replace("uri: [ldaps://ldap.example.com]", "uri:\n      - ldaps://a.example.com\n"
                                                          "      - ldaps://a.example.com")
    assert problems(tmp_path, "", base) == [f"{tmp_path / 'cluster.yaml'}:9:9: URI listed 2 times"]


def test_paths_are_relative_to_the_spec_file_and_may_start_with_home(tmp_path):
    files(tmp_path)
    text = BASE + "    ca_cert: keys/ca.pem\n"
    c = load_text(text, str(tmp_path / "sub" / ".." / "cluster.yaml"))
    assert ldap_file(c, "keys/ca.pem") == tmp_path / "keys" / "ca.pem"
    assert ldap_file(c, "/etc/ssl/x.pem") == Path("/etc/ssl/x.pem")
    assert ldap_file(c, "~/x") == Path("~/x").expanduser().resolve()
    assert read_ca(c) == CA.read_bytes()


def test_warnings_tls_off_and_a_readable_password_file(tmp_path):
    files(tmp_path)
    text = BASE + "    tls: false\n    bind_dn: cn=reader,dc=example,dc=com\n    bind_password_file: keys/bind\n"
    c = load_text(text, str(tmp_path / "cluster.yaml"))
    warnings = ldap_warnings(c)
    assert len(warnings) == 1 and warnings[0].startswith("identity.ldap.tls: false: ")
    (tmp_path / "keys" / "bind").chmod(0o644)
    assert ldap_warnings(c)[1] == (f"identity.ldap.bind_password_file {tmp_path / 'keys' / 'bind'} can be read by "
                                   "other users of the control host (mode 644): chmod 600 it")
    assert ldap_warnings(load_text(BASE, str(tmp_path / "cluster.yaml"))) == []
    assert "s3cret" not in "".join(ldap_warnings(c))


def test_the_bind_password_is_the_file_less_one_newline(tmp_path):
    files(tmp_path)
    text = BASE + "    bind_dn: cn=reader,dc=example,dc=com\n    bind_password_file: keys/bind\n"
    c = load_text(text, str(tmp_path / "cluster.yaml"))
    assert bind_password(c) == "s3cret"
    (tmp_path / "keys" / "bind").write_text("s3cret\r\n")
    assert bind_password(c) == "s3cret"
    (tmp_path / "keys" / "bind").write_text("two\nlines\n")
    assert bind_password(c) == "two\nlines"  # refused where it is written (render/sssd.py), naming the file
    assert bind_password(load_text(BASE, str(tmp_path / "cluster.yaml"))) is None


@pytest.mark.parametrize("content, why", [(b"", "empty"), (b"  \n", "blank"), (b"\xff\xfe", "not UTF-8"),
                                          (b"x" * 5000, "longer than 4096 bytes")])
def test_a_password_file_that_holds_no_password_is_refused(tmp_path, content, why):
    p = tmp_path / "bind"
    p.write_bytes(content)
    with pytest.raises(CorralError, match=why) as err:
        admin_secret_text(p, "LDAP bind password")
    assert err.value.where == str(p)


def test_a_missing_password_file_names_it(tmp_path):
    with pytest.raises(CorralError, match="cannot read the LDAP bind password") as err:
        admin_secret_text(tmp_path / "nope", "LDAP bind password")
    assert err.value.where == str(tmp_path / "nope")


@pytest.mark.parametrize("dn", ["'cn=reader,dc=example,dc=com '", "'cn= reader,dc=example,dc=com'",
                                "'cn=reader ,dc=example,dc=com'"])
def test_a_dn_with_a_blank_at_a_value_end_is_a_located_spec_error(tmp_path, dn):
    """Found by the hostile-strings fuzz: sssd.conf cannot hold such a value, so the spec refuses it."""
    text = BASE.replace("base: dc=example,dc=com", f"base: dc=example,dc=com\n    bind_dn: {dn}")
    with pytest.raises(SpecError) as err:
        load_text(text, str(tmp_path / "cluster.yaml"))
    (problem,) = err.value.problems
    assert problem.where.endswith("cluster.yaml:9:14"), problem  # the bind_dn line
    assert problem.message.startswith("identity.ldap.bind_dn") and "blanks at a value's ends" in problem.message
