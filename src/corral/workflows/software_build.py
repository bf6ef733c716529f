"""`corral software build EASYCONFIG`: EasyBuild builds one easyconfig (and, with --robot, what it needs) as a
Slurm job of the software manager on the build node, never as root (spec/easybuild.py says who and where).

On the first login node, as the manager (runuser): the easyconfig, checked here (a regular file ending .eb,
at most MAX_BYTES of UTF-8), is copied into corral's robot path (<prefix>/easyconfigs/NAME.eb, where a later
build's robot finds it), then `eb --robot` runs in a job on the build node (batch_job.py: bounded by
software.easybuild.time_limit, cancelled at the bound, on a failure or on Ctrl-C). The job first resolves
the build (`eb --dry-run-short`: the module it makes), then builds in a directory of its own on local disk,
removed on every way out; EasyBuild's own log of a failed build stays in <prefix>/builds/JOB/, the job's
output in <prefix>/builds/JOB.log. The verdict: the module name, or the failure and both logs."""

from __future__ import annotations

import posixpath
import re
import secrets
from pathlib import Path

from corral.engine.shell import q
from corral.errors import UsageError
from corral.render.easybuild import BUILD_PATH, CONFIG
from corral.workflows import batch_job

MARK = "@@corral-eb"
JOB_PREFIX = "corral-eb-"
MAX_BYTES = 256 * 1024
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,200}\.eb")

# As the manager, on the build node: resolve, then build in a directory of its own.
JOB = r"""set -u
export PATH={venv}/bin:/usr/local/bin:/usr/bin:/bin EASYBUILD_CONFIGFILES={config}
echo "{mark} UID $(id -u)"
echo "{mark} NODE $(hostname)"
work={work}; logs={logs}
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM INT
mkdir -m 0700 "$work" && mkdir -p "$logs" || {{ echo "{mark} FAIL cannot make $work and $logs"; exit 1; }}
eb() {{ command eb --robot --buildpath "$work" --tmp-logdir "$logs" "$@"; }}
why() {{ {{ grep -m1 -E '^ERROR' "$1" || tail -n1 "$1"; }} | cut -c1-300; }}
eb --dry-run-short {ec} > "$logs/plan.out" 2>&1 || {{ tail -n 20 "$logs/plan.out"
  echo "{mark} FAIL eb --dry-run-short: $(why "$logs/plan.out")"; exit 1; }}
plan=$(cat "$logs/plan.out")
printf '%s\n' "$plan"
echo "{mark} MODULE $(printf '%s\n' "$plan" | grep -Eo '\(module: [^)]+\)' | tail -n1 | sed 's/^(module: //; s/)$//')"
eb {ec} 2>&1 | tee "$logs/eb.out"; rc=${{PIPESTATUS[0]}}
echo "{mark} EB_RC $rc"
if [ "$rc" -ne 0 ]; then
  echo "{mark} FAIL $(why "$logs/eb.out")"
  echo "{mark} EBLOG $(ls -t "$logs"/easybuild-*.log 2>/dev/null | head -n1)"
  exit "$rc"
fi
rm -rf "$logs"
"""

# As the manager, on the login node: the easyconfig in from stdin, renamed into place whole.
STAGE = r"""cd / && runuser -u {user} -- sh -c 'umask 022; cat > "$1.part" && mv -f "$1.part" "$1"' sh {ec} \
  && echo "{mark} STAGED" || echo "{mark} FAIL cannot write {ec} as {user}"
"""


def easyconfig(path: str | Path) -> tuple[str, str]:
    """(file name, text) of a local easyconfig, or a UsageError: a regular file (not a link) named NAME.eb,
    at most MAX_BYTES of UTF-8 text."""
    p = Path(path)
    if not NAME.fullmatch(p.name):
        raise UsageError(f"{p.name!r} is not an easyconfig's name", where=str(p),
                         fix="give an easyconfig file NAME.eb (letters, digits, . _ + -)")
    try:
        if p.is_symlink() or not p.is_file():
            raise UsageError("not a regular file", where=str(p), fix="give the easyconfig file itself")
        if p.stat().st_size > MAX_BYTES:
            raise UsageError(f"larger than {MAX_BYTES // 1024} KiB: not an easyconfig", where=str(p),
                             fix="give the easyconfig file itself (its sources come from source_urls)")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("not UTF-8 text: not an easyconfig", where=str(p), fix="give the easyconfig file") from None
    except OSError as exc:
        raise UsageError(f"cannot read it: {exc.strerror}", where=str(p), fix="give a file you can read") from None
    if "\0" in text:
        raise UsageError("holds a NUL byte: not an easyconfig", where=str(p), fix="give the easyconfig file")
    return p.name, text


class Build:
    """One build's names: the job, the staged easyconfig, the local build directory and the logs."""

    def __init__(self, name: str, prefix: str, venv: str, user: str, node: str, token: str | None = None,
                 build_path: str = BUILD_PATH) -> None:
        self.user, self.node, self.venv, self.build_path = user, node, venv, build_path
        self.job = JOB_PREFIX + (token or secrets.token_hex(4))
        self.ec = posixpath.join(prefix, "easyconfigs", name)
        self.logs = posixpath.join(prefix, "builds", self.job)
        self.log = self.logs + ".log"

    def stage_script(self) -> str:
        return STAGE.format(user=q(self.user), ec=q(self.ec), mark=MARK)

    def job_script(self) -> str:
        return JOB.format(mark=MARK, venv=q(self.venv), config=q(CONFIG), work=q(posixpath.join(self.build_path, self.job)),
                          logs=q(self.logs), ec=q(self.ec))

    def submit_script(self, wait: int) -> str:
        return batch_job.submit_script(self.job, self.log, "exec bash -l -c " + q(self.job_script()), wait, MARK,
                                       as_user=self.user, node=self.node)

    def cancel_script(self) -> str:
        return batch_job.cancel_script(self.job)


def parse(text: str) -> dict[str, str]:
    """The MARK lines: KEY value (the last of each key)."""
    return batch_job.parse_marks(text, MARK)
