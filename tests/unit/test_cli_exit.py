"""The `corral` process ends with os._exit (cli/main.py `end`), skipping the interpreter's teardown; what
that teardown did that matters must still happen: atexit handlers run, buffered stdout and stderr reach
their pipes, the exit status is the command's, and a thread of ours still running is waited for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SPEC = Path(__file__).parents[1] / "fixtures" / "spec" / "slurm_valid.yaml"


def _corral(tmp_path: Path, before: str, *args: str) -> subprocess.CompletedProcess:
    """`corral ARGS` as the console script runs it (main() reading sys.argv), after `before`; stdout a
    pipe and PYTHONUNBUFFERED unset, so what is printed stays in the buffer until someone flushes it."""
    code = (f"import sys\n{before}\nsys.argv = ['corral', *{list(args)!r}]\n"
            "from corral.cli.main import main\nmain()\nprint('not reached')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_atexit_handlers_run_and_buffered_output_is_flushed(tmp_path):
    before = (f"import atexit, pathlib\n"
              f"print('buffered before the command')\n"
              f"sys.stderr.write('buffered on stderr\\n')\n"
              f"atexit.register(lambda: (print('from the exit handler'), pathlib.Path({str(tmp_path / 'handler')!r}).write_text('ran')))")
    done = _corral(tmp_path, before, "spec", "check", "-f", str(SPEC))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "buffered before the command"
    assert any(line.endswith("3 nodes, 8 GPUs") for line in lines)
    assert lines[-1] == "from the exit handler" and "not reached" not in done.stdout
    assert "buffered on stderr" in done.stderr
    assert (tmp_path / "handler").read_text() == "ran"


def test_the_exit_status_is_the_commands(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodes: 3\n")
    done = _corral(tmp_path, "", "spec", "check", "-f", str(bad))
    assert done.returncode == 2 and "not reached" not in done.stdout


def test_a_running_thread_of_ours_is_waited_for(tmp_path):
    before = (f"import threading, time, pathlib\n"
              f"threading.Thread(target=lambda: (time.sleep(0.3), pathlib.Path({str(tmp_path / 'thread')!r}).write_text('done'))).start()")
    done = _corral(tmp_path, before, "spec", "check", "-f", str(SPEC))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread").read_text() == "done"
