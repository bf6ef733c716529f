"""`corral bundle build` for the default virtual cluster's spec (ctl, gpu01-02, login1): size and build
time, medians of 3, warm (the .debs taken from the virtual cluster's repository), cold (every .deb
downloaded from the mirror) and warm with the virtual cluster's base image (--with-virtual), plus
`bundle verify`. Run from the repository root: `python -m bench.bench_bundle [--runs N] [--no-cold]
[--no-virtual]`."""

from __future__ import annotations

import argparse
import hashlib
import json
import tarfile
import tempfile
from pathlib import Path

from bench.common import BENCH_SUBNET, median, table, timed
from corral.bundle.build import build
from corral.bundle.verify import verify
from corral.spec.loader import load
from corral.virtual import image
from corral.virtual.defaults import default_spec
from corral.virtual.repo import REPO


def _content(path) -> bytes:
    """The manifest less its serial and valid_until (the build's time): what must be the same each build."""
    m = json.loads(tarfile.open(path).extractfile("manifest.json").read())
    return json.dumps({k: v for k, v in m.items() if k not in ("serial", "valid_until")}, sort_keys=True).encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--no-virtual", action="store_true", help="skip the --with-virtual row (the base image)")
    args = ap.parse_args()
    status = image.ensure_image() / "var/lib/dpkg/status"
    rows = []
    with tempfile.TemporaryDirectory(prefix="corral-bench-bundle-") as d:
        spec = Path(d) / "cluster.yaml"
        spec.write_text(default_spec("bench", 2, 4, "h100", BENCH_SUBNET, "corralbench0", 18088))
        cluster = load(spec)
        kinds = [("warm (virtual repo cache)", REPO / "pool", None)] + (
            [] if args.no_cold else [("cold (mirror)", None, None)]) + (
            [] if args.no_virtual else [("warm + base image (--with-virtual)", REPO / "pool", image.ensure_image())])
        for kind, cache, base in kinds:
            builds = [build(cluster, Path(d) / f"b{i}.tar", status, cache, image=base) for i in range(args.runs)]
            checks = [timed(lambda b=b: verify(b.path, b.fingerprint)) for b in builds]
            manifests = {hashlib.sha256(_content(b.path)).hexdigest() for b in builds}
            rows.append([kind, builds[0].packages, f"{builds[0].size / 1e6:.1f}",
                         f"{median([b.seconds for b in builds]):.1f}",
                         f"{min(b.seconds for b in builds):.1f}-{max(b.seconds for b in builds):.1f}",
                         f"{median(checks):.2f}", median([b.downloaded for b in builds]),
                         "yes" if len(manifests) == 1 else "no"])
    print(table("corral bundle build, default virtual cluster spec", [
        "build", "packages", "MB", "build s (median)", "range", "verify s", "downloaded", "same manifest"], rows))


if __name__ == "__main__":
    main()
