"""pam_slurm_adopt's text (render/adopt.py) on Debian 12's own files (tests/fixtures/pam/: /etc/pam.d/sshd as
openssh-server installs it, common-session as pam-auth-update writes it): the blocks go in once, a second
apply changes nothing, switching off gives the stock file back byte for byte, a file corral cannot place
the module in is refused; the access file; PrologFlags=Contain in slurm.conf follows the switch."""

from __future__ import annotations

import hashlib
import subprocess
import textwrap
from pathlib import Path

import pytest

from corral.errors import CorralError
from corral.render import NodeHW, render_slurm_conf
from corral.render import adopt
from corral.render.adopt import (BEGIN, BEGIN_SESSION, END, MODULE, access_conf, account_block, adopt_lines,
                                 converged_block_hashes, restore_lines, session_block, text)
from corral.spec.loader import load_text

PAM = Path(__file__).resolve().parents[1] / "fixtures" / "pam"
SSHD_BYTES = (PAM / "debian12-sshd").read_bytes()
SESSION_BYTES = (PAM / "debian12-common-session").read_bytes()


def lines(data: bytes) -> list[str]:
    """A file as pyinfra's FileContents reads it: its lines, without their newlines."""
    return data.decode().split("\n")[:-1]


SSHD, SESSION = lines(SSHD_BYTES), lines(SESSION_BYTES)
NODE = "gpu01"
ACCOUNT_BLOCK = account_block(NODE)


def modules(pam_lines: list[str], kind: str) -> list[str]:
    """The module lines of one type (account, session), in order, as PAM reads them."""
    return [ln.split("#", 1)[0].strip() for ln in pam_lines
            if ln.split("#", 1)[0].strip().lstrip("-").startswith(kind)]


def test_the_fixtures_are_debian_12s_files():
    assert hashlib.md5(SSHD_BYTES).hexdigest() == "8b4c7a12b031424b2a9946881da59812"  # the conffile's md5sum
    assert "@include common-account" in SSHD and "@include common-session" in SSHD
    assert any("pam_systemd.so" in ln for ln in SESSION)


def test_the_account_block_takes_common_accounts_place_as_a_substack_and_ends_the_account_stack():
    """common-account as a substack: libpam-sss's profile puts `sufficient pam_localuser.so` there, which
    in an @include would end sshd's whole account stack for every local user before pam_slurm_adopt."""
    new = adopt_lines(SSHD, SESSION, NODE)
    i = SSHD.index("@include common-account")
    assert new[i:i + len(ACCOUNT_BLOCK)] == ACCOUNT_BLOCK and "@include common-account" not in new
    assert modules(new, "account") == [
        "account    required     pam_nologin.so",
        "account    substack     common-account",
        "account    sufficient   pam_access.so nodefgroup accessfile=/etc/security/corral-adopt.conf",
        f"account    required     {MODULE} nodename=gpu01"]


def test_an_account_block_of_an_earlier_corral_after_the_include_is_replaced():
    """corral before 2026-12 put its block after `@include common-account`: the next apply puts the block
    in the include's place, and switching off still gives the stock file back."""
    i = SSHD.index("@include common-account")
    earlier = SSHD[:i + 1] + [BEGIN, "# Managed by corral (identity.pam_slurm_adopt): ...",
                              "account    sufficient   pam_access.so nodefgroup accessfile=/etc/security/corral-adopt.conf",
                              f"account    required     {MODULE} nodename=gpu01", END] + SSHD[i + 1:]
    assert restore_lines(earlier) == SSHD
    assert adopt_lines(earlier, SESSION, NODE) == adopt_lines(SSHD, SESSION, NODE)


def test_an_account_include_spelt_otherwise_comes_back_as_it_was():
    sshd = [("@include  common-account # site" if ln == "@include common-account" else ln) for ln in SSHD]
    new = adopt_lines(sshd, SESSION, NODE)
    assert "# was: @include  common-account # site" in new
    assert restore_lines(new) == sshd


def test_the_module_is_told_the_nodes_slurm_name():
    """slurmd runs as `-N <NodeName>`; without nodename= the module guesses it from the host name."""
    assert ACCOUNT_BLOCK[-2].endswith(f"{MODULE} nodename=gpu01")
    renamed = adopt_lines(adopt_lines(SSHD, SESSION, NODE), SESSION, "gpu-a01")
    assert f"account    required     {MODULE} nodename=gpu-a01" in renamed
    assert restore_lines(renamed) == SSHD
    with pytest.raises(CorralError, match="cannot be a pam_slurm_adopt argument"):
        account_block("gpu01 action_no_jobs=ignore")


def test_sshd_loses_pam_systemd_and_keeps_every_other_session_module_in_its_place():
    new = adopt_lines(SSHD, SESSION, NODE)
    assert not any("pam_systemd" in ln for ln in modules(new, "session"))
    assert "@include common-session" not in new
    copied = modules(session_block(SESSION), "session")
    stock = modules(SESSION, "session")
    assert len(copied) == len(stock)  # one module per module: [default=1] still jumps over pam_deny alone
    assert [a == b.rstrip() for a, b in zip(copied, stock)] == [True] * (len(stock) - 1) + [False]
    assert stock[-1].split() == ["session", "optional", "pam_systemd.so"]
    assert copied[-1].split() == ["session", "optional", "pam_permit.so"]
    assert new.index(BEGIN_SESSION) == SSHD.index("@include common-session") + len(ACCOUNT_BLOCK) - 1


def test_the_whole_file_as_debian_12_gets_it():
    new = adopt_lines(SSHD, SESSION, NODE)
    added = [ln for ln in new if ln not in SSHD]
    assert added == ACCOUNT_BLOCK + [
        BEGIN_SESSION,
        "# Managed by corral (identity.pam_slurm_adopt): /etc/pam.d/common-session without pam_systemd. Switching",
        "# pam_slurm_adopt off puts back the line:",
        "# was: @include common-session",
        "session\t[default=1]\t\t\tpam_permit.so",
        "session\trequisite\t\t\tpam_deny.so",
        "session\trequired\t\t\tpam_permit.so",
        "session\trequired\tpam_unix.so",
        "# pam_systemd.so would move the session out of the job's cgroup: pam_permit.so in its place",
        "session\toptional\tpam_permit.so",
        END]
    assert [ln for ln in SSHD if ln not in new] == ["@include common-account", "@include common-session"]


def test_a_second_apply_changes_nothing():
    once = adopt_lines(SSHD, SESSION, NODE)
    assert adopt_lines(once, SESSION, NODE) == once


def test_switching_off_gives_the_stock_file_back_byte_for_byte():
    assert text(restore_lines(adopt_lines(SSHD, SESSION, NODE))).encode() == SSHD_BYTES
    assert restore_lines(SSHD) == SSHD  # nothing of corral's: nothing changes


def test_a_session_line_spelt_otherwise_comes_back_as_it_was():
    sshd = [("@include   common-session  # the admin's" if ln == "@include common-session" else ln) for ln in SSHD]
    new = adopt_lines(sshd, SESSION, NODE)
    assert "# was: @include   common-session  # the admin's" in new
    assert restore_lines(new) == sshd


def test_a_changed_common_session_changes_the_copy():
    """pam-auth-update enabled pam_mkhomedir since: the next apply copies it too."""
    before = adopt_lines(SSHD, SESSION, NODE)
    session = SESSION[:-1] + ["session\toptional\t\t\tpam_mkhomedir.so", SESSION[-1]]
    after = adopt_lines(before, session, NODE)
    assert [ln for ln in after if ln not in before] == ["session\toptional\t\t\tpam_mkhomedir.so"]
    assert restore_lines(after) == SSHD


def test_common_session_without_pam_systemd_stays_included():
    session = [ln for ln in SESSION if "pam_systemd" not in ln]
    new = adopt_lines(SSHD, session, NODE)
    assert "@include common-session" in new and BEGIN_SESSION not in new
    assert [ln for ln in new if ln not in SSHD] == ACCOUNT_BLOCK


def test_a_pam_file_without_common_account_is_refused():
    sshd = [ln for ln in SSHD if ln != "@include common-account"]
    with pytest.raises(CorralError, match="0 '@include common-account' lines, not one") as exc:
        adopt_lines(sshd, SESSION, NODE)
    assert "identity.pam_slurm_adopt: false" in exc.value.fix
    with pytest.raises(CorralError, match="2 '@include common-account' lines"):
        adopt_lines(SSHD + ["@include common-account"], SESSION, NODE)


def test_pam_systemd_in_sshd_itself_is_refused():
    with pytest.raises(CorralError, match="line 56 loads pam_systemd itself"):
        adopt_lines(SSHD + ["-session   optional   pam_systemd.so"], SESSION, NODE)


def test_no_sshd_file_and_no_common_session_are_refused():
    with pytest.raises(CorralError, match="^/etc/pam.d/sshd: the file does not exist"):
        adopt_lines(None, SESSION, NODE)
    with pytest.raises(CorralError, match="^/etc/pam.d/common-session: /etc/pam.d/sshd includes it, but the file does not exist"):
        adopt_lines(SSHD, None, NODE)


@pytest.mark.parametrize("broken, what", [
    ([BEGIN, "account required pam_permit.so"], "without its '# END corral'"),
    ([END], "'# END corral' where corral's block was not expected"),
    ([BEGIN, BEGIN_SESSION, END], "'# BEGIN corral pam_slurm_adopt session' where"),
    ([BEGIN_SESSION, "session required pam_unix.so", END], "holds 0 '# was:' lines, not one"),
])
def test_broken_markers_are_refused_and_nothing_is_guessed(broken, what):
    sshd = SSHD[:10] + broken + SSHD[10:]
    with pytest.raises(CorralError, match=what.replace("[", r"\[")) as exc:
        restore_lines(sshd)
    assert "the file was left as it is" in str(exc.value)
    with pytest.raises(CorralError):
        adopt_lines(sshd, SESSION, NODE)


def test_the_access_file_lets_in_root_and_the_ssh_user_only():
    assert access_conf("admin").splitlines()[-2:] == ["+:root admin:ALL", "-:ALL:ALL"]
    assert access_conf("root").splitlines()[-2:] == ["+:root:ALL", "-:ALL:ALL"]
    assert all(ln.startswith("#") for ln in access_conf("admin").splitlines()[:-2])
    with pytest.raises(CorralError, match="not a Unix user name"):
        access_conf("admin:ALL\n+:ALL")


def test_the_hashes_are_what_nodestate_reads_of_a_converged_file(tmp_path):
    """The sed NodeState runs (deploy/nodestate.py), on the file corral writes."""
    path = tmp_path / "sshd"
    path.write_text(text(adopt_lines(SSHD, SESSION, NODE)))
    sed = subprocess.run(["sed", "-n", "/^# BEGIN corral/,/^# END corral/p", str(path)],
                         capture_output=True, check=True).stdout
    assert hashlib.sha256(sed).hexdigest() in converged_block_hashes(SESSION, NODE)
    path.write_text(text(SSHD))
    sed = subprocess.run(["sed", "-n", "/^# BEGIN corral/,/^# END corral/p", str(path)],
                         capture_output=True, check=True).stdout
    assert hashlib.sha256(sed).hexdigest() == adopt.EMPTY_SHA
    no_systemd = [ln for ln in SESSION if "pam_systemd" not in ln]
    assert converged_block_hashes(no_systemd, NODE) == {hashlib.sha256(text(ACCOUNT_BLOCK).encode()).hexdigest()}


SPEC = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
      - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
    """)


def _conf(spec: str) -> list[str]:
    cluster = load_text(spec, "cluster.yaml")
    return render_slurm_conf(cluster, {"gpu01": NodeHW(8, 1, 4, 2, 64000)}).splitlines()


def test_slurm_conf_has_prolog_flags_contain_while_pam_slurm_adopt_is_on():
    assert [ln for ln in _conf(SPEC) if ln.startswith("PrologFlags")] == ["PrologFlags=Contain"]
    off = _conf(SPEC + "identity: {pam_slurm_adopt: false}\n")
    assert not [ln for ln in off if "PrologFlags" in ln or "pam_slurm_adopt" in ln]
