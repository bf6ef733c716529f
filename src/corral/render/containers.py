"""enroot and pyxis, rendered (pure): /etc/enroot/enroot.conf, Slurm's plugstack.conf, the script
that builds pyxis against the installed Slurm, and the
per-user directories corral's prolog creates. Used by deploy/containers.py and deploy/slurm.py."""

from __future__ import annotations

import shlex

from corral.spec.containers import EnrootSpec, PyxisSpec
from corral import paths
from corral.render.spank_env import SO as ENV_SO

ENROOT_CONF = "/etc/enroot/enroot.conf"
# what earlier corral releases bound into every container (their TaskProlog and job-env): removed where found,
# the job environment plugin (render/spank_env.py) took the TaskProlog's place
TASK_MOUNTS = "/etc/enroot/mounts.d/50-corral-task.fstab"
PLUGSTACK = "/etc/slurm/plugstack.conf"
PYXIS_PREFIX = "/usr/local"
PYXIS_SO = f"{PYXIS_PREFIX}/lib/slurm/spank_pyxis.so"
PYXIS_MARK = paths.PYXIS_MARK
FETCH_PACKAGES = ("curl", "ca-certificates")  # enroot's .debs and pyxis' source are downloaded
BUILD_PACKAGES = ("gcc", "make", "libc6-dev", "libslurm-dev")


def enroot_conf(e: EnrootSpec) -> str:
    lines = ["# Managed by corral (nvidia.enroot in cluster.yaml); enroot evaluates these with the user's shell",
             f"ENROOT_RUNTIME_PATH {e.runtime_path}", f"ENROOT_CACHE_PATH {e.cache_path}",
             f"ENROOT_DATA_PATH {e.data_path}"]
    lines += [f"{k} {v}" for k, v in sorted(e.settings.items())]
    return "\n".join(lines) + "\n"


def user_dirs(e: EnrootSpec | None) -> list[dict]:
    """What the prolog creates for the job's user (template with {uid} and {gid}), whether the epilog
    removes it once the user's last job on the node ends (the cache is kept), and whether the group
    shares it (a path with $(id -g) but not $(id -u): root-owned, the group's, 2770)."""
    if e is None:
        return []
    def fmt(t: str) -> str:
        return t.replace("{", "{{").replace("}", "}}").replace("$(id -u)", "{uid}").replace("$(id -g)", "{gid}")
    def entry(t: str, clean: bool) -> dict:  # a path per group, not per user, is shared by the group
        shared = "$(id -g)" in t and "$(id -u)" not in t
        return {"path": fmt(t), "clean": clean and not shared, "shared": shared}
    dirs = [(e.runtime_path, True), (e.data_path, True), (e.cache_path, False)]
    return [entry(t, clean) for t, clean in dirs if "$(id -" in t]  # a fixed path is the admin's to make


def plugstack_conf(pyxis: PyxisSpec | None) -> str:
    """Slurm's SPANK plugin stack (configless: slurmctld hands it to every slurmd): with pyxis, corral's job
    environment plugin first, then pyxis."""
    head = "# Managed by corral: Slurm SPANK plugins (nvidia.pyxis in cluster.yaml)\n"
    if pyxis is None:
        return head + "# none\n"
    args = " ".join(f"{k}={v}" for k, v in sorted(pyxis.args.items()))
    return (head + "# the job environment, in place of a TaskProlog (which would run inside the container: "
                   "render/spank_env.py)\n"
            f"required {ENV_SO}\n" + f"required {PYXIS_SO} {args}".rstrip() + "\n")


def checksum_script(sha256: str | None, label: str = "pyxis", key: str = "nvidia.pyxis.sha256") -> str:
    """Check the download ("$tmp/src.tar.gz") against the spec's sha256 (`key`); `skip` says so; none at
    all refuses (spec check asks for one first: this is the last line of defence)."""
    q = shlex.quote
    if sha256 == "skip":
        return f"echo {q(f'{label}: source installed unchecked ({key}: skip)')} >&2\n"
    if not sha256:
        return f"echo {q(f'{label}: no {key}: nothing installed')} >&2; exit 1\n"
    return (f"echo {q(sha256)} \"$tmp/src.tar.gz\" | sha256sum -c --quiet - || "
            f"{{ echo {q(f'{label}: the source does not match {key}; nothing installed')} >&2; exit 1; }}\n")


def pyxis_build_script(p: PyxisSpec) -> str:
    """Fetch pyxis' source, check it, build it against the Slurm headers installed (libslurm-dev),
    install the plugin, record what it was built against (pyxis_mark). A failed download, checksum
    or build leaves the installed plugin as it was."""
    q = shlex.quote
    url = p.url.format(version=p.version)
    return (f"set -eu\ntmp=$(mktemp -d /var/tmp/corral-pyxis.XXXXXX); trap 'rm -rf \"$tmp\"' EXIT\n"
            f"curl -fsSL --retry 3 -o \"$tmp/src.tar.gz\" {q(url)} || "
            f"{{ echo {q(f'pyxis: cannot download {url}')} >&2; exit 1; }}\n{checksum_script(p.sha256)}"
            "mkdir \"$tmp/src\" && tar -xzf \"$tmp/src.tar.gz\" -C \"$tmp/src\" --strip-components=1\n"
            f"make -C \"$tmp/src\" -j\"$(nproc)\" prefix={PYXIS_PREFIX} >\"$tmp/build.log\" 2>&1 || "
            "{ tail -n 20 \"$tmp/build.log\" >&2; echo 'pyxis: build failed' >&2; exit 1; }\n"
            f"make -C \"$tmp/src\" install prefix={PYXIS_PREFIX} >>\"$tmp/build.log\" 2>&1 || "
            "{ tail -n 20 \"$tmp/build.log\" >&2; echo 'pyxis: install failed' >&2; exit 1; }\n"
            f"test -s {PYXIS_SO}\ninstall -d -m 755 {q(PYXIS_MARK.rsplit('/', 1)[0])}\n"
            f"printf 'pyxis %s slurm %s\\n' {q(p.version)} \"$(dpkg-query -W -f='${{Version}}' libslurm-dev)\" "
            f"> {PYXIS_MARK}.new && mv -f {PYXIS_MARK}.new {PYXIS_MARK}\n")


def pyxis_mark(p: PyxisSpec, slurm_dev_version: str) -> str:
    return f"pyxis {p.version} slurm {slurm_dev_version}\n"
