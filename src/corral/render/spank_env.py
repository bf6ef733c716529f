"""corral's job environment as a SPANK plugin, for clusters with pyxis (pure: its C source and build script;
deployed by deploy/containers.py, named first in plugstack.conf by render/containers.py).

Why: from Slurm 24.11 slurmstepd runs every script through itself (`run_command`'s launcher, fexecve of
its own binary), and a TaskProlog runs after pyxis has entered the container (SPANK task_init comes
first): the kernel then looks for slurmstepd's loader and libraries (libslurmfull.so) inside the
container image. A static busybox image has no loader at all, a distribution image has no
libslurmfull.so (NVIDIA/pyxis issue #163): the task fails with `TaskProlog failed status=127`. So
where pyxis runs, corral names no TaskProlog (render/slurm.py) and this plugin does its work instead,
in slurmstepd before any task starts (`slurm_spank_user_init`, as the job's user), without running
anything: each `NAME=value` line of /etc/corral/job-env whose variable the job has not set goes into
the job's environment (render/job_env.py: the same names, checked the same way), and an
XDG_RUNTIME_DIR this node lacks (the submitting login session's) is unset. Tasks inherit it, in a
container or not.

Built on every Slurm node where pyxis is (the same compiler and libslurm-dev: a SPANK plugin must be
built against the Slurm release that loads it); rebuilt when its source or the installed libslurm-dev
changes (the mark records both), like pyxis.
"""

from __future__ import annotations

import hashlib
import shlex

from corral import paths
from corral.render.job_env import PATH as JOB_ENV

SO = "/usr/local/lib/slurm/spank_corral_env.so"
SOURCE_PATH = f"{paths.SHARE}/spank_corral_env.c"
MARK = f"{paths.SHARE}/corral-env-build"

SOURCE = r"""/* Managed by corral: the job environment (/etc/corral/job-env) as a SPANK plugin (render/spank_env.py). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <slurm/spank.h>

SPANK_PLUGIN(corral_env, 1);

static int valid_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    char value[4096], line[8192];
    struct stat st;
    FILE *f;

    (void)ac;
    (void)av;
    if (!spank_remote(sp))
        return 0;
    /* the submitting session's XDG_RUNTIME_DIR (a login node's /run/user/UID) is not on this node */
    if (spank_getenv(sp, "XDG_RUNTIME_DIR", value, sizeof value) == ESPANK_SUCCESS && value[0]
        && stat(value, &st) != 0)
        spank_unsetenv(sp, "XDG_RUNTIME_DIR");
    f = fopen("@JOB_ENV@", "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        char *eq;
        line[strcspn(line, "\n")] = '\0';
        if (!line[0] || line[0] == '#' || !(eq = strchr(line, '=')))
            continue;
        *eq = '\0';
        if (!valid_name(line))
            continue;
        if (spank_getenv(sp, line, value, sizeof value) != ESPANK_ENV_NOEXIST)
            continue; /* the job set it */
        spank_setenv(sp, line, eq + 1, 0);
    }
    fclose(f);
    return 0;
}
""".replace("@JOB_ENV@", JOB_ENV)


SOURCE_ID = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]  # which source a build was made from


def mark(slurm_dev_version: str) -> str:
    """What the installed plugin was built from and against."""
    return f"corral-env {SOURCE_ID} slurm {slurm_dev_version}\n"


def build_script() -> str:
    """Compile the source corral installed at SOURCE_PATH against the installed Slurm's headers, install the
    plugin, record the mark. A failed build leaves the installed plugin as it was."""
    q = shlex.quote
    return (f"set -eu\ntmp=$(mktemp -d /var/tmp/corral-env.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT\n"
            f"gcc -O2 -Wall -shared -fPIC -o \"$tmp/plugin.so\" {q(SOURCE_PATH)} >\"$tmp/build.log\" 2>&1 || "
            "{ tail -n 20 \"$tmp/build.log\" >&2; echo 'corral job environment plugin: build failed' >&2; exit 1; }\n"
            f"install -d -m 755 {q(SO.rsplit('/', 1)[0])}\n"
            f"install -m 755 \"$tmp/plugin.so\" {q(SO)}.new && mv -f {q(SO)}.new {q(SO)}\n"
            f"printf 'corral-env %s slurm %s\\n' {q(SOURCE_ID)} "
            f"\"$(dpkg-query -W -f='${{Version}}' libslurm-dev)\" > {q(MARK)}.new && mv -f {q(MARK)}.new {q(MARK)}\n")
