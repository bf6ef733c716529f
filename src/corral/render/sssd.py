"""SSSD for `identity.ldap`: sssd.conf (one domain, `corral`, read from the directory with the rfc2307
schema), and `sss` in /etc/nsswitch.conf's passwd, group and shadow lines. Pure: the bind password is
passed in (deploy/sssd.py reads it from identity.ldap.bind_password_file on the control host).

sssd.conf is an INI file read by ding-libs: `key = value` lines, a comment only at the start of a line
(no inline comments), no quoting or escapes, the value trimmed of surrounding blanks. So a value can
be written only if it is one line, has no control character and no blank at either end; corral also
refuses quotes, backslashes and '%' (SSSD expands %u, %h... in some options: the only one corral
writes is its own `fallback_homedir = HOMES/%u`). Spec values are typed (spec/models_users.py), this
is the second line of defence; the bind password, which is not typed, gets the same check.
"""

from __future__ import annotations

import re
import unicodedata

from corral.errors import CorralError
from corral.spec.access import users_log_in
from corral.spec.cluster import Cluster, Node
from corral.spec.models_users import PRIVILEGED_GROUPS
from corral.spec.rules_ldap import ldap_file
from corral.spec.rules_users import RESERVED

SSSD_CONF = "/etc/sssd/sssd.conf"
CA_CERT = "/etc/sssd/corral-ca.pem"   # identity.ldap.ca_cert, copied to every node
NSSWITCH = "/etc/nsswitch.conf"
DOMAIN = "corral"                     # [domain/corral]; `sssctl domain-status corral`
NSS_DATABASES = ("passwd", "group", "shadow")
HEADER = "# Managed by corral from cluster.yaml - do not edit"
LINE_BREAKS = set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # where str.splitlines() splits
UNSAFE = set("\"'\\%")

# what SSSD needs on a Debian node: sss_cache/sssctl (sssd-tools), sssctl's bus (sssd-dbus, dbus); not the
# sssd metapackage (AD, IPA, Kerberos providers, Samba libraries)
PACKAGES = ("sssd-common", "sssd-ldap", "sssd-tools", "sssd-dbus", "libnss-sss", "libpam-sss", "dbus")


def _control(value: str) -> bool:
    return any(c in LINE_BREAKS or unicodedata.category(c) == "Cc" for c in value)


def _value(key: str, value: str, allow: str = "") -> str:
    """`value` as sssd.conf reads it back: one line, no controls, no blank at the ends, no quote,
    backslash or '%' (except corral's own `allow`, e.g. %u)."""
    rest = value.replace(allow, "") if allow else value
    if (not value or _control(value) or value != value.strip() or any(c in UNSAFE for c in rest)
            or value.startswith(("#", ";"))):
        raise CorralError(f"refusing to render {SSSD_CONF}: the value of {key} cannot be written there",
                          value=value, fix="correct identity.ldap in the spec (one line without quotes, "
                                           "backslashes, '%' or blanks at the ends)")
    return value


def check_bind_password(cluster: Cluster, password: str) -> str:
    """The bind password as sssd.conf can hold it: one line, no control character, no blank at either
    end (SSSD would trim it); else a CorralError naming the password file."""
    ldap = cluster.spec.identity.ldap
    source = str(ldap_file(cluster, ldap.bind_password_file)) if ldap and ldap.bind_password_file else None
    why = ("empty" if not password else "more than one line" if any(c in LINE_BREAKS for c in password)
           else "holds a control character" if _control(password)
           else "starts or ends with a blank (SSSD would drop it)" if password != password.strip() else None)
    if why:
        raise CorralError(f"the LDAP bind password for {SSSD_CONF} is {why}", where=source,
                          fix="write the password alone on the file's first line (one trailing newline "
                              "is fine), without control characters or blanks around it")
    return password


def start_tls(cluster: Cluster) -> bool:
    """StartTLS: with tls and an ldap:// URI (SSSD 2.8 skips it on ldaps:// URIs of the same list)."""
    ldap = cluster.spec.identity.ldap
    return bool(ldap and ldap.tls and any(u.startswith("ldap://") for u in ldap.uri))


def access(cluster: Cluster, node: Node) -> list[tuple[str, str, str]]:
    """Who of the directory may log in on `node` (spec/access.py): on user nodes identity.ldap.login_groups
    (none listed: everyone), elsewhere identity.ldap.admin_groups (none listed: nobody, `deny`). Local
    accounts (root, corral's SSH user) are not SSSD's to refuse."""
    ldap = cluster.spec.identity.ldap
    groups = ldap.login_groups if users_log_in(cluster, node) else ldap.admin_groups
    if groups:
        return [("access_provider", "simple", ""), ("simple_allow_groups", ", ".join(groups), "")]
    return [("access_provider", "simple" if users_log_in(cluster, node) else "deny", "")]


def nss_filters(cluster: Cluster) -> list[str]:
    """[nss] lines: names SSSD never returns from the directory, so a directory user or group named like a
    system one (a group `sudo`: sudoers' %sudo matches by name) gains nothing."""
    users = sorted(RESERVED | {cluster.spec.ssh.user})
    groups = sorted(set(PRIVILEGED_GROUPS) | RESERVED)
    return [f"filter_users = {_value('filter_users', ', '.join(users))}",
            f"filter_groups = {_value('filter_groups', ', '.join(groups))}"]


def render_sssd_conf(cluster: Cluster, bind_password: str | None, node: Node) -> str:
    """sssd.conf (0600 root:root on `node`) for identity.ldap; `bind_password` with bind_dn."""
    ldap = cluster.spec.identity.ldap
    if ldap is None:
        raise CorralError("identity.ldap is not set: there is no sssd.conf to render",
                          fix="set identity.ldap in the spec")
    homes = cluster.spec.identity.homes.rstrip("/")
    domain: list[tuple[str, str, str]] = [  # key, value, the '%' specifier corral itself writes
        ("id_provider", "ldap", ""), ("auth_provider", "ldap", ""),
        ("ldap_uri", ",".join(ldap.uri), ""), ("ldap_search_base", ldap.base, ""),
        ("ldap_schema", "rfc2307", ""),
    ]
    if ldap.tls:
        domain.append(("ldap_tls_reqcert", "demand", ""))
        if start_tls(cluster):
            domain.append(("ldap_id_use_start_tls", "true", ""))
    else:  # a test directory: nothing encrypted, no certificate checked (warned on every run). SSSD refuses
        # LDAP password authentication without TLS unless told by this switch (not in its cfg_rules.ini:
        # `sssctl config-check` calls it unknown, sssd 2.8 reads it)
        domain += [("ldap_tls_reqcert", "never", ""), ("ldap_id_use_start_tls", "false", ""),
                   ("ldap_auth_disable_tls_never_use_in_production", "true", "")]
    if ldap.ca_cert is not None:
        domain.append(("ldap_tls_cacert", CA_CERT, ""))
    if ldap.bind_dn is not None:
        if bind_password is None:
            raise CorralError("identity.ldap.bind_dn is set but no bind password was given",
                              fix="set identity.ldap.bind_password_file")
        domain += [("ldap_default_bind_dn", ldap.bind_dn, ""), ("ldap_default_authtok_type", "password", ""),
                   ("ldap_default_authtok", check_bind_password(cluster, bind_password), "")]
    domain += [("cache_credentials", "false", ""), ("enumerate", "false", ""),
               ("fallback_homedir", f"{homes}/%u", "%u"), ("default_shell", "/bin/bash", ""),
               ("min_id", str(ldap.min_id), ""), ("max_id", str(ldap.max_id), ""), *access(cluster, node)]
    lines = [HEADER, "[sssd]", "services = nss, pam", f"domains = {DOMAIN}", "", "[nss]", *nss_filters(cluster),
             "", "[pam]", "", f"[domain/{DOMAIN}]"]
    for key, value, allow in domain:
        # the password was checked above, as the password file's content (it may hold quotes or '%')
        lines.append(f"{key} = {value if key == 'ldap_default_authtok' else _value(key, value, allow)}")
    return "\n".join(lines) + "\n"


_NSS_LINE = re.compile(r"^(?P<db>[a-z_]+)(?P<colon>:[ \t]*)(?P<sources>[^#\n]*?)(?P<tail>[ \t]*(#.*)?)$")
_AFTER = ("files", "systemd", "compat")


def _with_sss(sources: str) -> str:
    words = sources.split()
    if "sss" in words:
        return sources
    at = len(words)
    for i, w in enumerate(words):
        if w in _AFTER:
            at = i + 1
            while at < len(words) and words[at].startswith("["):  # files's own [NOTFOUND=return]
                at += 1
    if at == len(words):
        return f"{sources} sss" if sources else "sss"
    # rebuild with the admin's spacing: insert before the word that now follows sss
    spans = [m.span() for m in re.finditer(r"\S+", sources)]
    cut = spans[at][0]
    return f"{sources[:cut]}sss {sources[cut:]}"


def nsswitch_with_sss(text: str) -> str:
    """/etc/nsswitch.conf with `sss` in the passwd, group and shadow lines, after `files` and
    `systemd` (local accounts are found first); everything else as it was. A line that already names
    sss is left alone (idempotent); a missing database line is added as `DB: files sss`."""
    out, seen = [], set()
    lines = text.split("\n")
    for line in lines:
        m = _NSS_LINE.match(line)
        if m and m.group("db") in NSS_DATABASES:
            seen.add(m.group("db"))
            line = m.group("db") + m.group("colon") + _with_sss(m.group("sources")) + m.group("tail")
        out.append(line)
    missing = [db for db in NSS_DATABASES if db not in seen]
    if missing:
        if out and out[-1] == "":
            out.pop()
        out += [f"{db}:{' ' * max(1, 16 - len(db) - 1)}files sss" for db in missing] + [""]
    return "\n".join(out)
