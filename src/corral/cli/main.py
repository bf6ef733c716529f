"""corral command line: a thin layer that maps results to text/JSON and errors to exit codes.

Exit codes: 0 ok; 1 failed on some node or check; 2 usage or spec error; 130 interrupted.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import NoReturn

import typer

from corral import __version__
from corral.cli import (backup_cmd, bundle_cmd, check_cmd, facts_cmd, fanout_cmd, history_cmd, images_cmd, render_cmd,
                        report_cmd, run_cmd, software_cmd, spec_cmd, virtual_cmd)
from corral.cli.common import err
from corral.errors import CorralError

from typer import Abort

try:  # recent typer vendors its own click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer on plain click
    from click.exceptions import ClickException

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="corral: GPU cluster automation - spec -> plan -> apply -> validated Slurm cluster.")
app.add_typer(spec_cmd.spec_app, name="spec")
app.add_typer(spec_cmd.import_app, name="import")
app.add_typer(virtual_cmd.app, name="virtual")
app.add_typer(report_cmd.report_app, name="report")
app.add_typer(fanout_cmd.node_app, name="node")
app.add_typer(bundle_cmd.bundle_app, name="bundle")
app.add_typer(images_cmd.images_app, name="images")
app.add_typer(software_cmd.software_app, name="software")
for _name, _command in {**run_cmd.COMMANDS, **check_cmd.COMMANDS, **facts_cmd.COMMANDS,
                        **backup_cmd.COMMANDS, **history_cmd.COMMANDS, **fanout_cmd.COMMANDS,
                        **render_cmd.COMMANDS}.items():
    app.command(_name)(_command)


def _version(value: bool) -> None:
    if value:
        print(f"corral {__version__}")
        raise typer.Exit()


# Commands that never reach a node: they run without gevent's monkey patching (~40 ms of imports).
OFFLINE = frozenset({"spec", "import", "render", "history"})


@app.callback()
def root(ctx: typer.Context,
         version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the version and exit")) -> None:
    """corral: GPU cluster automation."""
    if ctx.invoked_subcommand not in OFFLINE:
        from corral.engine import prepare_process
        prepare_process()  # before paramiko/ssl are imported: pyinfra connects to nodes in parallel


def _bug(exc: BaseException) -> int:
    import datetime
    import tempfile
    import traceback
    from pathlib import Path
    log = Path(tempfile.gettempdir()) / "corral-debug.log"
    with open(log, "a") as f:
        f.write(f"--- {datetime.datetime.now().isoformat()} corral {' '.join(sys.argv[1:])}\n")
        f.write("".join(traceback.format_exception(exc)))
    err.print(f"error: internal error ({type(exc).__name__}: {exc}); this is a bug in corral. "
              f"Traceback written to {log}", markup=False)
    return 1


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process is ours (the console script, python -m corral): it ends in end()
        # a young-generation collection every 20,000 allocations instead of 700: the spec's models, pyinfra's
        # ops and facts are long-lived, and collecting them over and over cost 17-23 ms of a 4-node plan's ~0.6 s
        gc.set_threshold(20_000, 50, 100)
    command = typer.main.get_command(app)
    try:
        rc = command.main(args=argv, prog_name="corral", standalone_mode=False)
    except CorralError as exc:
        err.print(f"error: {exc}", markup=False)
        rc = exc.exit_code
    except Abort:
        err.print("interrupted", markup=False)
        rc = 130
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        rc = 130
    except ClickException as exc:
        exc.show()
        rc = 2
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # noqa: BLE001 - last resort, reported as a bug
        rc = _bug(exc)
    rc = rc if isinstance(rc, int) else 0
    if argv is None:
        end(rc)
    return rc


def end(rc: int) -> NoReturn:
    """End the process without the interpreter's teardown, which frees every module, greenlet and SSH
    object one by one for nothing (80-140 ms after a plan of 4 nodes, 3-5 ms this way). What that exit
    does that matters is done first: the atexit handlers (logging's flush, temporary directories, any
    exit handler) and stdout/stderr flushed. The journal was written by the run itself. With a thread of
    ours still running, the ordinary exit waits for it, as it always did."""
    if threading.active_count() > 1:
        sys.exit(rc)
    atexit._run_exitfuncs()  # what the interpreter's own exit runs; public in all but name
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: there is no one left to tell
            pass
    os._exit(rc)
