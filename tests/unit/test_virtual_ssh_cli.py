"""`corral virtual ssh` behaves like ssh (issue 54): the words after NODE are the remote command (its options
too), joined with spaces for the remote shell; after `--` each word is one argument; corral's options go
before NODE or right after it (as ssh's do), never after the command's first word; a silent refusal gets
one line saying why. The ssh process is faked: argv in, status out."""

from __future__ import annotations

import shlex
import sys

import pytest

from corral.cli import virtual_cmd
from corral.cli.main import main
from corral.virtual.defaults import default_spec
from corral.virtual.keys import user_key_file

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT alice@laptop"


@pytest.fixture
def vdir(tmp_path):
    (tmp_path / "cluster.yaml").write_text(default_spec("utest", user_key=KEY))
    key = user_key_file(tmp_path / ".corral", "alice")
    key.parent.mkdir(parents=True)
    key.write_text("not a key: ssh is faked\n")
    return tmp_path


class Ran(list):
    """Each ssh argv the command ran; the fake exits 0 having said nothing (set `result` to change it)."""
    def __init__(self) -> None:
        super().__init__()
        self.result = {"rc": 0, "said": False}


@pytest.fixture
def ran(monkeypatch):
    calls = Ran()

    def fake_run(cmd):
        calls.append(cmd)
        return calls.result["rc"], calls.result["said"]

    def no_exec(*a):
        raise AssertionError(f"exec with a command to run: {a}")
    monkeypatch.setattr(virtual_cmd, "_run", fake_run)
    monkeypatch.setattr(virtual_cmd.os, "execvp", no_exec)
    return calls


def ssh(vdir, *args: str) -> int:
    return main(["virtual", "ssh", "--dir", str(vdir), *args])


def login_and_command(cmd: list[str]) -> tuple[str, list[str]]:
    """(user@address, the remote command words) of an ssh argv: what follows the destination."""
    at = next(i for i, a in enumerate(cmd) if "@" in a and not a.startswith("UserKnownHostsFile"))
    return cmd[at], cmd[at + 1:]


def test_one_string_is_one_shell_command_line(vdir, ran):
    assert ssh(vdir, "ctl", "a; b") == 0
    dest, remote = login_and_command(ran[0])
    assert dest.startswith("root@") and remote == ["a; b"]  # the remote shell runs a, then b


def test_words_are_joined_with_spaces_as_ssh_does(vdir, ran):
    assert ssh(vdir, "gpu01", "ls", "-l", "/tmp") == 0
    assert login_and_command(ran[0])[1] == ["ls -l /tmp"]
    assert ssh(vdir, "gpu01", "echo", "$HOME", "|", "wc") == 0
    assert login_and_command(ran[1])[1] == ["echo $HOME | wc"]  # the remote shell expands and pipes


def test_options_after_the_node_are_the_remote_commands(vdir, ran):
    assert ssh(vdir, "ctl", "scancel", "-u", "alice") == 0
    dest, remote = login_and_command(ran[0])
    assert dest.startswith("root@") and remote == ["scancel -u alice"]
    assert ssh(vdir, "ctl", "squeue", "--user", "alice", "--dir", "x", "--help") == 0
    assert login_and_command(ran[1])[1] == ["squeue --user alice --dir x --help"]


def test_user_before_the_node_is_corrals(vdir, ran):
    assert ssh(vdir, "--user", "alice", "login1", "hostname") == 0
    dest, remote = login_and_command(ran[0])
    assert dest.startswith("alice@") and remote == ["hostname"]
    assert str(user_key_file(vdir / ".corral", "alice")) in ran[0]
    assert ssh(vdir, "-u", "alice", "login1", "id", "-un") == 0
    assert login_and_command(ran[1])[0].startswith("alice@")


def test_double_dash_still_accepted_its_words_reach_the_command_as_they_are(vdir, ran):
    assert ssh(vdir, "--user", "alice", "gpu01", "--", "true") == 0
    assert login_and_command(ran[0])[1] == ["true"]
    words = ["sh", "-c", 'printf "%s|" "$@"', "x", "a b", "$HOME", "it's"]
    assert ssh(vdir, "login1", "--", *words) == 0
    (line,) = login_and_command(ran[1])[1]
    assert shlex.split(line) == words  # what the remote shell hands the command


def test_no_command_and_a_terminal_execs_an_interactive_ssh(vdir, ran, monkeypatch):
    execs = []
    monkeypatch.setattr(virtual_cmd.os, "execvp", lambda f, a: execs.append(a))
    monkeypatch.setattr(virtual_cmd.os, "isatty", lambda fd: True)
    ssh(vdir, "login1")
    (cmd,) = execs
    assert "-t" in cmd and login_and_command(cmd)[1] == []
    assert "LogLevel=ERROR" not in cmd  # a refusing node's reason (PAM's banner) reaches the person


def test_exit_status_passes_through(vdir, ran):
    ran.result.update(rc=3, said=False)
    assert ssh(vdir, "ctl", "exit 3") == 3


def test_a_silent_refusal_says_why(vdir, ran, capsys):
    ran.result.update(rc=255, said=False)
    assert ssh(vdir, "--user", "alice", "gpu01", "--", "true") == 255
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["corral: login as alice refused by gpu01 (pam_slurm_adopt lets users in only where they have a "
                   "job: start one there first, e.g. salloc -w gpu01)"]
    assert ssh(vdir, "--user", "alice", "ctl", "true") == 255
    assert "an infrastructure node" in capsys.readouterr().err
    ran.result.update(rc=255, said=True)  # the node gave its reason: nothing to add
    assert ssh(vdir, "--user", "alice", "gpu01", "true") == 255
    assert capsys.readouterr().err == ""
    ran.result.update(rc=255, said=False)  # root is never refused: a silent 255 is the command's own
    assert ssh(vdir, "gpu01", "exit 255") == 255
    assert capsys.readouterr().err == ""


def test_said_something_ignores_ssh_s_own_closing_line():
    assert not virtual_cmd.said_something(b"")
    assert not virtual_cmd.said_something(b"Connection closed by 10.213.0.11 port 22\r\n")
    assert virtual_cmd.said_something(b"Access denied by pam_slurm_adopt: you have no active jobs on this node\n"
                                      b"Connection closed by 10.213.0.11 port 22\r\n")
    assert virtual_cmd.said_something(b"alice@10.213.0.12: Permission denied (publickey).\r\n")


def test_run_passes_stderr_through_and_keeps_the_status(capfd):
    rc, said = virtual_cmd._run([sys.executable, "-c", "import sys; print('out'); sys.exit(255)"])
    assert (rc, said) == (255, False)
    rc, said = virtual_cmd._run([sys.executable, "-c", "import sys; sys.stderr.write('no jobs\\n'); sys.exit(255)"])
    assert (rc, said) == (255, True)
    captured = capfd.readouterr()
    assert captured.out == "out\n" and captured.err == "no jobs\n"


def test_corrals_options_right_after_the_node_are_still_its_own_as_ssh_takes_its_own(vdir, ran):
    assert ssh(vdir, "login1", "--user", "alice") == 0  # the next-step line `corral virtual up` prints
    dest, remote = login_and_command(ran[0])
    assert dest.startswith("alice@") and remote == []
    assert ssh(vdir, "login1", "-u", "alice", "--", "sbatch", "--wrap", "nvidia-smi -L") == 0
    dest, remote = login_and_command(ran[1])
    assert dest.startswith("alice@") and remote == ["sbatch --wrap 'nvidia-smi -L'"]
    assert main(["virtual", "ssh", "ctl", "--dir", str(vdir), "--user=alice", "id"]) == 0
    assert login_and_command(ran[2])[1] == ["id"]


def test_an_unknown_option_after_the_node_is_refused(vdir, ran, capsys):
    assert ssh(vdir, "ctl", "-x", "true") == 2
    assert "'-x' after the node is not an option of corral virtual ssh" in capsys.readouterr().err
    assert ssh(vdir, "ctl", "--user") == 2
    assert ran == []
