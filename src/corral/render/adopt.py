"""pam_slurm_adopt on compute nodes (identity.pam_slurm_adopt): the text of corral's pam_access file and
of /etc/pam.d/sshd with corral's blocks in it, and back (pure; deploy/adopt.py installs them).

What Slurm documents (https://slurm.schedmd.com/pam_slurm_adopt.html; doc/html/pam_slurm_adopt.shtml of
22.05.8, the version Debian 12 ships, says the same on every point here):
- `PrologFlags=Contain` in slurm.conf: every job gets an "extern" step on its nodes, which the SSH session
  joins (render/slurm.py writes it); proctrack/cgroup and task/cgroup, which corral configures.
- `account required pam_slurm_adopt.so` is the last module of sshd's account stack, after the included
  common-account, and nothing before it may end the stack early (the docs comment out a `sufficient`
  pam_localuser for that reason; libpam-sss's pam-auth-update profile puts exactly that line into
  common-account, so with SSSD every local user would skip pam_slurm_adopt). An admin's module may come
  before it as `sufficient` pam_access, which then lets those users in without a job: corral's access file
  admits root and ssh.user, so corral never locks itself out even while slurmd is down.
- root: pam_slurm_adopt returns PAM_IGNORE for uid 0 before it reads any Slurm configuration (its
  `ignore_root` option, on by default; 22.05's pam_sm_acct_mgmt), so common-account alone decides for root.
- pam_systemd: "The pam_systemd module will conflict with pam_slurm_adopt, so you need to disable it in all
  files that are included in sshd" (common-session on Debian). The docs make no cgroup v1/v2 distinction,
  and the conflict is real on v1 too (the virtual cluster: cgroup v1, proctrack/cgroup + task/cgroup):
  pam_slurm_adopt puts the sshd process into the job's cgroups in the account phase; pam_systemd, in the
  session phase after it, has logind move the process into user-UID.slice/session-N.scope, and systemd
  places a unit in every v1 hierarchy it manages - with Debian 12's defaults (systemd 252: Default{CPU,
  Memory,Tasks}Accounting=yes) that includes the cpu,cpuacct, memory and pids controllers - so the session
  would leave the job's memory limit and accounting. Older pages also said to mask systemd-logind; the 22.05 page no longer does, and corral does
  not (other services keep their logind sessions; SSH sessions get no /run/user/UID).

How corral does it on Debian 12:
- The module is named by its path, /lib/security/pam_slurm_adopt.so: bookworm's libpam-slurm-adopt
  (22.05.8) installs it there, outside libpam's module directory (/lib/x86_64-linux-gnu/security/), where
  a bare `pam_slurm_adopt.so` is looked up. The package ships no pam-auth-update profile and no
  maintainer scripts: installing it changes no PAM file. The line has no leading `-`: a missing module
  fails closed (every other user is refused) while pam_access still lets root and ssh.user in.
- `nodename=<NodeName>` on the module: slurmd runs as `-N <NodeName>` (deploy/slurm.py) and names its step
  sockets after it, while pam_slurm_adopt would otherwise guess the NodeName from the host name; a wrong
  guess is a "generic failure", which by default (action_generic_failure=ignore) lets every user in.
  The action_* options keep Slurm's defaults.
- pam_access gets `nodefgroup`: the names in the access file match user names only, never members of a
  group of that name.
- The account block takes the place of `@include common-account` (a file without that line is refused:
  where the stack ends would be a guess) and holds `account substack common-account`: common-account
  decides as one module, and a `sufficient` or `done` in it ends the substack only (Linux-PAM's
  `substack`, unlike `@include`), so pam_slurm_adopt is reached whatever pam-auth-update put there. The
  replaced line is kept in the block (`# was: ...`) and put back when the block goes.
- pam_systemd is disabled for sshd only: each `@include common-session` becomes a block holding
  common-session's module lines, with pam_systemd.so replaced by pam_permit.so under the same control, so
  the module count is unchanged and the jumps of pam-auth-update's stack (`[default=1]`) land where they
  did. The replaced line is kept in the block (`# was: ...`) and put back when the block goes. The block is
  made again from the node's common-session at every apply, so a later pam-auth-update reaches sshd at the
  next apply (plan shows the diff). A common-session without pam_systemd is left included as it is.
- Switching off removes corral's blocks and restores the file byte for byte (given as lines, as pyinfra's
  FileContents reads it).
"""

from __future__ import annotations

import hashlib
import re

from corral.errors import CorralError
from corral import paths

PAM_SSHD = "/etc/pam.d/sshd"
COMMON_SESSION = "/etc/pam.d/common-session"
ACCESS_FILE = paths.ADOPT_ACCESS
MODULE = "/lib/security/pam_slurm_adopt.so"   # where bookworm's libpam-slurm-adopt puts it (see above)


def module_path(os_name: str | None) -> str:
    """Where the node's release puts the module (spec/releases.py): trixie's usrmerged libpam-slurm-adopt
    installs it in libpam's own module directory, /usr/lib/x86_64-linux-gnu/security."""
    from corral.spec.releases import release
    return f"{release(os_name).pam_module_dir}/pam_slurm_adopt.so"

BEGIN = "# BEGIN corral pam_slurm_adopt"
BEGIN_SESSION = "# BEGIN corral pam_slurm_adopt session"
END = "# END corral"
WAS = "# was: "
EMPTY_SHA = hashlib.sha256(b"").hexdigest()   # NodeState's block hash of a file without corral's blocks
_USER = re.compile(r"[a-z_][a-z0-9_-]*")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# a PAM line: [-]type control module [args]; control is a word or a [bracketed list with spaces]
_LINE = re.compile(r"^(\s*-?(\w+)\s+(\[[^\]]*\]|\S+)\s+)(\S+)(.*)$")


def account_block(node: str, module: str = MODULE, original: str = "@include common-account") -> list[str]:
    """In place of sshd's `@include common-account`: common-account as a substack, then pam_access for root
    and corral's SSH user, then pam_slurm_adopt for everyone else. `nodename=`: the node's NodeName, as
    slurmd runs (`-N`), for the host name need not be it."""
    if not _NODE.fullmatch(node):
        raise CorralError("a node name that cannot be a pam_slurm_adopt argument", value=node,
                          fix="correct the node's name in cluster.yaml")
    return [BEGIN,
            "# Managed by corral (identity.pam_slurm_adopt): a user may log in only while they have a Slurm job",
            "# on this node, and the session joins it; root and corral's SSH user pass pam_access without one.",
            "# common-account as a substack: a `sufficient` module there (libpam-sss's pam_localuser) ends the",
            "# substack, not sshd's account stack. Switching pam_slurm_adopt off puts back the line:",
            WAS + original,
            "account    substack     common-account",
            f"account    sufficient   pam_access.so nodefgroup accessfile={ACCESS_FILE}",
            f"account    required     {module} nodename={node}",
            END]


def job_free(ssh_user: str, exempt: list[str] = ()) -> list[str]:
    """Who may use a job-confined compute node without a job there: root, corral's SSH user and
    identity.adopt_exempt_users, by name (each checked: a pam_access and a cron.allow entry)."""
    for name in (ssh_user, *exempt):
        if not _USER.fullmatch(name):
            raise CorralError("not a Unix user name: cannot be a pam_access entry", value=name,
                              fix="correct ssh.user or identity.adopt_exempt_users")
    return list(dict.fromkeys(["root", ssh_user, *exempt]))


def access_conf(ssh_user: str, exempt: list[str] = ()) -> str:
    """corral's pam_access file: root, corral's SSH user and identity.adopt_exempt_users may log in
    without a job; nobody else. Users by name only: a group here (sudo, wheel) would let in whoever the
    directory or a node's admin puts in a group of that name."""
    return ("# Managed by corral (identity.pam_slurm_adopt): who may SSH to this compute node without a\n"
            f"# Slurm job on it (pam_access, from {PAM_SSHD}). Everyone else needs a job here.\n"
            f"+:{' '.join(job_free(ssh_user, exempt))}:ALL\n"
            "-:ALL:ALL\n")


# cron and at start what a user asks outside every job (and its cgroup, where the GPUs are not confined): on a
# job-confined compute node only the users who may log in without a job may use them (security review 3, N7)
CRON_ALLOW, AT_ALLOW = "/etc/cron.allow", "/etc/at.allow"


def schedulers_allow(ssh_user: str, exempt: list[str] = ()) -> str:
    """/etc/cron.allow and /etc/at.allow: one name a line (cron and at read no comments there)."""
    return "".join(f"{name}\n" for name in job_free(ssh_user, exempt))


def _code(line: str) -> str:
    """The line without its comment (Linux-PAM cuts a line at '#')."""
    return line.split("#", 1)[0]


def _includes(line: str, name: str) -> bool:
    return _code(line).split() == ["@include", name]


def _pam_systemd(line: str) -> re.Match | None:
    m = _LINE.match(_code(line))
    if m and m.group(2) == "session" and m.group(4).rsplit("/", 1)[-1] == "pam_systemd.so":
        return m
    return None


def session_block(common_session: list[str], original: str = "@include common-session") -> list[str] | None:
    """common-session's module lines with pam_systemd.so replaced by pam_permit.so (same control, so every
    jump lands where it did), in corral's block; None when common-session has no pam_systemd."""
    body, replaced = [], False
    for line in common_session:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _pam_systemd(line)
        if m:
            body += ["# pam_systemd.so would move the session out of the job's cgroup: pam_permit.so in its place",
                     m.group(1) + "pam_permit.so"]
            replaced = True
        else:
            body.append(line.rstrip())
    if not replaced:
        return None
    return [BEGIN_SESSION,
            f"# Managed by corral (identity.pam_slurm_adopt): {COMMON_SESSION} without pam_systemd. Switching",
            "# pam_slurm_adopt off puts back the line:",
            WAS + original,
            *body, END]


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line index of each corral block; markers that are not BEGIN ... END pairs are refused
    (where a block ends would be a guess, and a wrong guess deletes the admin's lines)."""
    spans, start = [], None
    for i, line in enumerate(lines):
        s = line.strip()
        if s in (BEGIN, BEGIN_SESSION) and start is None:
            start = i
        elif s in (BEGIN, BEGIN_SESSION) or (s == END and start is None):
            _broken(f"line {i + 1}: {s!r} where corral's block was not expected")
        elif s == END:
            spans.append((start, i))
            start = None
    if start is not None:
        _broken(f"line {start + 1}: {lines[start].strip()!r} without its {END!r}")
    return spans


def _broken(what: str) -> None:
    raise CorralError(f"corral's markers are not BEGIN ... END pairs ({what}); the file was left as it is",
                      where=PAM_SSHD,
                      fix=f"edit the node's {PAM_SSHD}: delete the broken block (or add its missing marker), "
                          "then apply again")


def restore_lines(sshd: list[str]) -> list[str]:
    """/etc/pam.d/sshd without corral's blocks: the file as it was before corral (a block gives back the
    line it replaced; an account block of corral before 2026-12 followed the include and replaced nothing)."""
    out, last = [], 0
    for first, end in _blocks(sshd):
        out += sshd[last:first]
        was = [line for line in sshd[first:end] if line.startswith(WAS)]
        session = sshd[first].strip() == BEGIN_SESSION
        if len(was) > 1 or (session and not was):
            _broken(f"line {first + 1}: the block holds {len(was)} {WAS.strip()!r} lines, not one")
        out += [line[len(WAS):] for line in was]
        last = end + 1
    return out + sshd[last:]


def adopt_lines(sshd: list[str] | None, common_session: list[str] | None, node: str,
                module: str = MODULE) -> list[str]:
    """/etc/pam.d/sshd with corral's blocks (made afresh: applying twice changes nothing): the account block
    in place of `@include common-account`, and each `@include common-session` replaced by a copy without
    pam_systemd when common-session has it."""
    if sshd is None:
        raise CorralError("the file does not exist", where=PAM_SSHD,
                          fix="install openssh-server on the node (corral reaches it over SSH: check the "
                              "node's PAM setup), or set identity.pam_slurm_adopt: false")
    base = restore_lines(sshd)
    account = [i for i, line in enumerate(base) if _includes(line, "common-account")]
    if len(account) != 1:
        raise CorralError(f"{len(account)} '@include common-account' lines, not one: where "
                          "pam_slurm_adopt goes (last in the account stack) would be a guess; nothing was changed",
                          where=PAM_SSHD,
                          fix=f"keep one `@include common-account` line in the node's {PAM_SSHD} (Debian's file "
                              "has it after pam_nologin), or set identity.pam_slurm_adopt: false")
    direct = [i for i, line in enumerate(base) if _pam_systemd(line)]
    if direct:
        raise CorralError(f"line {direct[0] + 1} loads pam_systemd itself, which would move SSH "
                          "sessions out of the Slurm job's cgroup; nothing was changed", where=PAM_SSHD,
                          value=base[direct[0]].strip(),
                          fix="comment that line out (pam_slurm_adopt needs sshd without pam_systemd), or set "
                              "identity.pam_slurm_adopt: false")
    out = []
    for i, line in enumerate(base):
        if _includes(line, "common-session"):
            if common_session is None:
                raise CorralError(f"{PAM_SSHD} includes it, but the file does not exist",
                                  where=COMMON_SESSION, fix="run `pam-auth-update` on the node, then apply again")
            block = session_block(common_session, line)
            out += block if block else [line]
        elif i == account[0]:
            out += account_block(node, module, line)
        else:
            out.append(line)
    return out


def text(lines: list[str]) -> str:
    """A file's text from its lines (as FileContents gives them)."""
    return "".join(line + "\n" for line in lines)


def converged_block_hashes(common_session: list[str] | None, node: str, module: str = MODULE) -> set[str]:
    """What NodeState reads of /etc/pam.d/sshd (sha256 of every corral block's lines, in file order) when
    it holds the blocks adopt_lines() writes for a stock sshd file: the account block, and the session block
    before or after it when common-session has pam_systemd. Another hash means: read the file."""
    account = text(account_block(node, module))
    session = session_block(common_session) if common_session is not None else None
    if session is None:
        return {hashlib.sha256(account.encode()).hexdigest()}
    return {hashlib.sha256((a + b).encode()).hexdigest() for a, b in ((account, text(session)),
                                                                      (text(session), account))}
