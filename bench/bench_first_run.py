"""What a newcomer's first `corral up` pays before its nodes boot, per OS release: the base image built
by debootstrap and the default spec's packages fetched into corral's repository, both into an EMPTY
cache (a temporary directory: the machine's own /var/cache/corral is neither read nor changed), then the
Slurm 26.05 set (`slurm.version: "26.05"` on Debian 13) fetched on top. What follows (nodes up, apply,
validate) is bench_up.py's, from warm caches. One thing is not fresh: the package step resolves against
the release's private apt lists under /var/cache/corral/apt (virtual/apt_release.py, refreshed daily), so
a fresh machine adds one download of the suite's indexes (Debian 13: about 10 MB) to it.

Network-bound (Debian's archive): the figures say how long this machine's mirror took, as a user would
wait for it. Run as root on an otherwise idle machine:
    .venv/bin/python -m bench.bench_first_run [--runs 1] [--releases debian-13,debian-12]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.common import spread, table, timed
from corral.components.views import packages_for
from corral.spec.loader import load_text
from corral.spec.releases import release
from corral.virtual import image, repo, slurm_more
from corral.virtual.defaults import EXAMPLE_USER, default_spec
from corral.virtual.keys import ensure_key, user_key_file

SLURM_MORE = "26.05"


def one(os_name: str) -> dict[str, float]:
    """Seconds of each first-run step of `os_name` into a fresh cache."""
    with tempfile.TemporaryDirectory(prefix="corral-first-run-", ignore_cleanup_errors=True) as d:
        cache = Path(d)
        key = ensure_key(user_key_file(cache / "state", EXAMPLE_USER), f"{EXAMPLE_USER}@bench")
        cluster = load_text(default_spec(os_name=os_name, user_key=key), "cluster.yaml")
        out: dict[str, float] = {}
        built: list[Path] = []
        out["base image (debootstrap)"] = timed(lambda: built.append(image.ensure_image(cache=cache, os_name=os_name)))
        out["packages into the repository"] = timed(lambda: repo.ensure_repo(
            built[0], packages_for(cluster), repo.repo_dir(os_name, cache), os_name=os_name))
        rel = release(os_name)
        found = slurm_more.wanted(rel, SLURM_MORE)
        if found is not None:
            major, src = found
            out[f"Slurm {SLURM_MORE} set"] = timed(lambda: slurm_more.ensure(
                repo.repo_dir(os_name, cache), major, src, cache / "apt" / src.suite,
                built[0] / "var/lib/dpkg/status", image.apt_options(rel, cache)))
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--releases", default="debian-13,debian-12")
    args = ap.parse_args()
    rows = []
    for os_name in args.releases.split(","):
        runs = [one(os_name) for _ in range(args.runs)]
        for step in runs[0]:
            rows.append([os_name, step, *spread([r[step] for r in runs], 1)])
        rows.append([os_name, "total", *spread([sum(r.values()) for r in runs], 1)])
    print(table(f"first run into an empty cache ({args.runs} run(s) each)", ["release", "step", "s", "range s"], rows))


if __name__ == "__main__":
    main()
