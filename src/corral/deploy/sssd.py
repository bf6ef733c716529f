"""sssd: with `identity.ldap`, every node reads users and groups from the LDAP directory through SSSD.

On every node: SSSD's LDAP provider and tools (Debian: sssd-common, sssd-ldap, sssd-tools for sssctl
and sss_cache, sssd-dbus for sssctl's InfoPipe, dbus), libnss-sss and libpam-sss; `sss` in
/etc/nsswitch.conf's passwd, group and shadow lines after `files` and `systemd` (local accounts first);
pam_sss in the PAM stack (`pam-auth-update --enable sss`, which libpam-sss's own install does; homes
are not made by pam_mkhomedir: corral's users deploy makes them on the shared storage); the CA
certificate at /etc/sssd/corral-ca.pem (0644) and /etc/sssd/sssd.conf (0600 root:root, 0640 on Debian 13: it holds the
bind password, which plan diffs, logs and the journal never show); sssd enabled and running.

A running sssd takes a change of sssd.conf or of the CA by a restart, and a changed sssd.conf also
expires every cached user and group (`sss_cache -E`). Ready means SSSD answers and its `corral` domain
is online: a lookup through sss made it reach the directory, and `sssctl domain-status corral -o`
(through the system bus and SSSD's InfoPipe, D-Bus activated) says Online, within about 60 s; a wrong
bind password, CA or URI leaves it Offline and the apply fails with sssd's last log lines.

identity.ldap unset: nothing is done, and nothing is removed (a node configured by an earlier spec
keeps SSSD as it is; remove sssd.conf and `sss` from nsswitch.conf by hand if that is wanted).
"""

from __future__ import annotations

import hashlib
import io

from pyinfra import host
from pyinfra.api import FileUploadCommand, deploy, operation
from pyinfra.facts.files import FileContents

from corral.components import gates
from corral.deploy import operations
from corral.deploy.installs import installs
from corral.deploy.nodestate import Want, register, snapshot
from corral.engine.shell import cmd
from corral.errors import CorralError
from corral.render.restart import dropin_path
from corral.render.sssd import (CA_CERT, DOMAIN, NSSWITCH, PACKAGES, SSSD_CONF, nsswitch_with_sss,
                                render_sssd_conf)
from corral.secrets import admin_secret_text
from corral.spec.rules_ldap import MAX_FILE_BYTES, ldap_file
from corral.spec.releases import release

WANT = register(Want(paths=(SSSD_CONF, CA_CERT, dropin_path("sssd")), services=("sssd",), packages=PACKAGES))
PAM_AUTH = "/etc/pam.d/common-auth"
SECRET_KEYS = ("ldap_default_authtok",)
# a lookup through sss (of a name no directory holds) makes SSSD reach the directory; then the domain
# must be online. Each command is bounded: an unreachable server must not stall the readiness loop.
READY = (f"timeout 5 getent -s sss passwd corral-sssd-probe; "
         f"LC_ALL=C timeout 5 sssctl domain-status {DOMAIN} -o | grep -qx 'Online status: Online'")
LOGS = f"journalctl -u sssd -n 20 --no-pager; tail -n 20 /var/log/sssd/sssd_{DOMAIN}.log"
CACHE_EXPIRE = ("sss_cache -E || echo 'sss_cache -E failed: cached users and groups expire on their own "
                "(entry_cache_timeout)' >&2")
PAM_CHECK = ("grep -q '^[^#]*pam_sss[.]so' /etc/pam.d/common-auth || { echo 'pam_sss is not enabled: "
             "/etc/pam.d/common-* have local changes pam-auth-update does not overwrite; run "
             "pam-auth-update --force --enable sss, or add pam_sss.so to them by hand' >&2; exit 1; }")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text(lines: list[str] | None) -> str:
    return "".join(line + "\n" for line in lines) if lines else ""


@installs(lambda conf, ca=None, **_: {SSSD_CONF: conf, **({CA_CERT: ca} if ca is not None else {})},
          lambda files, arguments: {SSSD_CONF} if arguments.get("password") else set())  # the CA beside it is public
@operation()
def sssd_config(conf: str, want: Want, ca: str | bytes | None = None, password: str | None = None,
                mode: str = "600"):
    """sssd.conf (0600 root:root; 0640 where the release's sssd.service makes it so at each start) and the
    CA certificate (0644). The diff masks the bind password, the
    new one and the node's old one (every `ldap_default_authtok =` line). A running sssd is restarted;
    a changed sssd.conf also expires SSSD's cache. sssd not running yet: the service op starts it."""
    snap = snapshot(want)
    files: dict[str, tuple[bytes, str]] = {} if ca is None else {
        CA_CERT: (ca.encode() if isinstance(ca, str) else ca, "644")}
    files[SSSD_CONF] = (conf.encode(), mode)  # the release's (spec/releases.py sssd_conf_mode)
    changed, meta = [], []
    for path, (data, file_mode) in files.items():
        cur = snap.files.get(path)
        if not cur or cur.get("sha256") != _sha(data):
            changed.append(path)
        elif (cur["mode"], cur["user"], cur["group"]) != (file_mode, "root", "root"):
            meta.append(path)
    if not changed and not meta:
        host.noop("sssd.conf" + (" and the CA certificate" if ca is not None else "") + " up to date")
        return
    running = snap.services.get("sssd", ("",))[0] == "active"
    diff = ""
    for path in changed:
        old = host.get_fact(FileContents, path=path) if snap.files.get(path) else None
        diff += operations._diff(path, old, files[path][0].decode(errors="replace"))
    for path in meta:
        cur = snap.files[path]
        diff += f"{path}: mode/owner {cur['mode']} {cur['user']}:{cur['group']} -> {files[path][1]} root:root\n"
    diff = operations.mask_diff(diff, (password,) if password else (), SECRET_KEYS)
    if changed and running:
        label = "restart sssd" + (", expire its cache" if SSSD_CONF in changed else "")
    else:
        label = "none (sssd not running yet)" if changed else "none"
    operations.annotate(disruption=label, diff=diff)
    for path in changed:
        data, file_mode = files[path]
        yield from operations.install_commands(path, data, file_mode, "root", "root")
    for path in meta:
        yield cmd("chown", "root:root", path)
        yield cmd("chmod", files[path][1], path)
    if changed and running:
        yield cmd("systemctl", "restart", "sssd")
        if SSSD_CONF in changed:
            yield CACHE_EXPIRE
        yield operations.readiness("sssd", READY, LOGS)


@installs(lambda **_: {NSSWITCH: None})  # the node's own file, `sss` added to three of its lines
@operation()
def nsswitch():
    """`sss` in /etc/nsswitch.conf's passwd, group and shadow lines (render/sssd.py); the rest of the file
    is the admin's. The plan shows the diff."""
    lines = host.get_fact(FileContents, path=NSSWITCH)
    current = _text(lines)
    new = nsswitch_with_sss(current)
    if lines is not None and new == current:
        host.noop(f"{NSSWITCH}: sss in passwd, group and shadow")
        return
    operations.annotate(disruption="none", diff=operations._diff(NSSWITCH, lines, new))
    if lines is None:
        yield from operations.install_commands(NSSWITCH, new.encode(), "644", "root", "root")
        return
    tmp = f"{NSSWITCH}.corral-new"
    yield cmd("cp", "-p", NSSWITCH, tmp)  # the file's own mode and owner
    stage, staged = operations._staging(NSSWITCH)
    yield from stage
    yield FileUploadCommand(io.BytesIO(new.encode()), tmp, remote_temp_filename=staged)
    yield cmd("mv", "-f", tmp, NSSWITCH)


@operation()
def pam_sss():
    """pam_sss in the PAM stack: libpam-sss's install enables it (`pam-auth-update --package`); enabled
    again when missing; refused, with the fix, when /etc/pam.d/common-* were edited by hand."""
    lines = host.get_fact(FileContents, path=PAM_AUTH) or []
    if any("pam_sss.so" in line.split("#", 1)[0] for line in lines):
        host.noop(f"pam_sss enabled ({PAM_AUTH})")
        return
    operations.annotate(disruption="none")
    yield cmd(operations.APT_ENV, "pam-auth-update", "--enable", "sss")  # --enable implies --package
    yield PAM_CHECK


def read_ca(cluster) -> bytes | None:
    ldap = cluster.spec.identity.ldap
    if ldap is None or ldap.ca_cert is None:
        return None
    path = ldap_file(cluster, ldap.ca_cert)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise CorralError(f"cannot read the LDAP CA certificate: {exc.strerror or exc}", where=str(path),
                          fix="put the CA certificate (PEM) there or correct identity.ldap.ca_cert") from None
    if len(data) > MAX_FILE_BYTES:
        raise CorralError(f"the LDAP CA certificate is larger than {MAX_FILE_BYTES} bytes", where=str(path),
                          fix="give the CA certificate(s) of the directory only")
    return data


def bind_password_path(cluster):
    """The admin's file holding the LDAP bind password (None: sssd.conf binds anonymously)."""
    ldap = cluster.spec.identity.ldap
    if ldap is None or ldap.bind_dn is None or ldap.bind_password_file is None:
        return None
    return ldap_file(cluster, ldap.bind_password_file)


def bind_password(cluster) -> str | None:
    path = bind_password_path(cluster)
    if path is None:
        return None
    return admin_secret_text(path, "LDAP bind password")


@deploy("sssd")
def sssd() -> None:
    cluster = host.data.corral_cluster
    if not gates.ldap(cluster, None):  # the declaration's gate (components/slurm.py)
        return
    password = bind_password(cluster)
    conf = render_sssd_conf(cluster, password, host.data.corral_node)
    operations.packages(name="SSSD (LDAP) installed", names=list(PACKAGES), want=WANT)
    nsswitch(name="sss in /etc/nsswitch.conf")
    pam_sss(name="pam_sss enabled")
    sssd_config(name="sssd.conf and the LDAP CA certificate", conf=conf, ca=read_ca(cluster), password=password,
                want=WANT, mode=release(host.data.corral_node.os).sssd_conf_mode)
    operations.restart_policy(name="sssd restarted by systemd when it dies", unit="sssd", want=WANT, started_next=True)
    operations.service(name="sssd running", unit="sssd", want=WANT, wait=READY, logs=LOGS)
