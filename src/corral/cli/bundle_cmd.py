"""`corral bundle build | verify | diff | use` (the work is in corral/bundle/). With --json each prints one
object, also when it fails. verify and diff need a key to compare the signer with (`--fingerprint`, or a
spec's pin or state dir key): without one they exit 1 rather than print an "ok" nothing backs (there is no
flag to trust the key the bundle carries: anyone who can alter the file can put their key in it)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from corral.bundle import VALID_DAYS
from corral.cli.common import JsonOpt, SpecOpt, err, fingerprint_option, load_cluster, out, print_json
from corral.errors import CorralError

bundle_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                         help="Offline installs: a signed bundle of every package the spec's nodes install.")

FprOpt = fingerprint_option("the signing key's fingerprint the bundle must carry, as gpg prints it or not "
                            "(default: the spec's packages.fingerprint, else this state dir's key)")


@bundle_app.command("build")
def build(spec: Optional[Path] = SpecOpt,
          output: Optional[Path] = typer.Option(None, "--output", "-o", help="the bundle file (default: "
                                                "corral-bundle-<name>.tar beside the spec)"),
          with_python: bool = typer.Option(False, "--with-python", help="also corral's wheel and its Python "
                                           "dependencies', for installing corral on an offline control host"),
          with_virtual: bool = typer.Option(False, "--with-virtual", help="also the virtual cluster's base image "
                                            "(about 275 MB), so `corral up --bundle` needs no Debian mirror"),
          valid_days: int = typer.Option(VALID_DAYS, "--valid-days", min=1, max=3650, help="how long the nodes' apt "
                                         "accepts the bundle's repository (InRelease's Valid-Until), and verify the "
                                         "bundle"),
          images: Optional[list[str]] = typer.Option(None, "--images", metavar="REF", help="also this container "
                                                     "image (registry/path:tag[@sha256:...]) as an OCI layout, fetched "
                                                     "with skopeo; `up`/`apply` with the bundle load it into the site "
                                                     "registry (repeat for more)"),
          as_json: bool = JsonOpt) -> None:
    """Resolve, download and sign every .deb the spec's nodes install, into one tar (and --images)."""
    from corral.bundle.build import build as run_build, refuse
    from corral.spec.rules_bundle import BUNDLE_RELEASES, bundle_os
    from corral.virtual import image
    from corral.virtual.repo import repo_dir
    try:
        from corral.bundle.images import refs
        refs(images or [])  # a hostile reference is refused before the spec is even read
        cluster = load_cluster(spec)
        refuse(cluster, images or None)  # before the release's node image and sources are prepared
        target = output or cluster.base_dir / f"corral-bundle-{cluster.spec.name}.tar"
        os_name = bundle_os(cluster)
        node_image = image.ensure_image(os_name=os_name) if os_name in BUNDLE_RELEASES else None
        status = image.release_status(node_image) if node_image else Path("/nonexistent")  # build() refuses it
        from corral.workflows.bundle_sources import sources
        built = run_build(cluster, target, status, repo_dir(os_name) / "pool",  # a clean node of the release
                          say=lambda m: None if as_json else err.print(m, markup=False),
                          python=python_pins() if with_python else None,
                          image=node_image if with_virtual else None, valid_days=valid_days,
                          sources=sources(cluster, status) if node_image else None, images=images or None)
    except CorralError as exc:
        if as_json:
            print_json({"ok": False, "error": str(exc)})
        raise
    if as_json:
        print_json({"ok": True, **built.to_json()})
        return
    out.print(f"bundle written: {built.path} ({built.packages} packages, {built.size / 1e6:.1f} MB, "
              f"{built.downloaded} downloaded{f', {built.images} images' if built.images else ''}) in {built.seconds:.1f} s",
              markup=False)
    out.print(f"signed by key {built.fingerprint}: pin it in the spec of the air-gapped site as "
              f"packages.fingerprint, and compare it there with `corral bundle verify`", markup=False)


def python_pins() -> tuple[list[str], Path | None]:
    """corral's installed dependencies, pinned to their installed versions, and corral's source directory
    (an editable or local install; None: no source here, and the wheels of the dependencies only)."""
    import importlib.metadata as md
    import json
    from corral.fanout.runtime import closure
    pins = [f"{d.metadata['Name']}=={d.version}" for d in closure()]
    raw = md.distribution("corral").read_text("direct_url.json")
    url = json.loads(raw).get("url", "") if raw else ""
    candidates = [Path(url.removeprefix("file://"))] if url.startswith("file://") else []
    import corral
    candidates.append(Path(corral.__file__).resolve().parents[2])  # src/corral/__init__.py in a checkout
    return pins, next((c for c in candidates if (c / "pyproject.toml").is_file()), None)


def _expected(fingerprint: str | None, spec: Path | None) -> tuple[str | None, Path | None]:
    """(the pinned fingerprint, the state dir's key home): --fingerprint, else the spec's pin or key."""
    from corral.bundle.trust import expected_fingerprint, key_home
    if spec is None:
        return fingerprint, None
    cluster = load_cluster(spec)
    return fingerprint or expected_fingerprint(cluster), key_home(cluster)


@bundle_app.command("verify")
def verify(file: Path = typer.Argument(..., help="a bundle written by `corral bundle build`"),
           spec: Optional[Path] = SpecOpt, fingerprint: Optional[str] = FprOpt, as_json: bool = JsonOpt) -> None:
    """Check the signature (by the pinned key alone) and every file's sha256; name each altered, missing, added
    or truncated file. Exit 1 on any problem, and when there is no key to compare the signer with."""
    from corral.bundle.verify import verify as run_verify
    checked = run_verify(file, *_expected(fingerprint, spec))
    if as_json:
        print_json(checked.to_json())
    else:
        for problem in checked.problems:
            err.print(f"problem: {problem}", markup=False)
        who = ("no key that checks" if not checked.fingerprint else f"key {checked.fingerprint} (the expected one)"
               if checked.ok else f"key {checked.fingerprint}" + ("" if checked.expected else
                                                                  " (NOT compared with a pinned key: UNCHECKED)"))
        verdict = "ok" if checked.ok else f"{len(checked.problems)} problem(s)"
        images = f", {checked.images} images" if checked.images else ""
        out.print(f"{file}: {verdict}: {checked.files} files, {checked.packages} packages{images}, signed by {who}",
                  markup=False)
    if not checked.ok:
        raise typer.Exit(1)


@bundle_app.command("diff")
def diff(a: Path = typer.Argument(..., help="the older bundle"), b: Path = typer.Argument(..., help="the newer one"),
         spec: Optional[Path] = SpecOpt, fingerprint: Optional[str] = FprOpt, as_json: bool = JsonOpt) -> None:
    """What changed between two bundles: packages added, removed, or at another version (exit 1 when either
    does not verify against the pinned key)."""
    from corral.bundle.diff import diff as run_diff, lines
    from corral.bundle.verify import verify as run_verify
    expected = _expected(fingerprint, spec)
    checked = [run_verify(p, *expected) for p in (a, b)]
    bad = [c for c in checked if c.manifest is None]
    if bad:
        msg = f"{bad[0].path}: no readable manifest ({'; '.join(bad[0].problems[:2])})"
        if as_json:
            print_json({"ok": False, "error": msg})
        else:
            err.print(f"error: {msg}", markup=False)
        raise typer.Exit(1)
    d = run_diff(checked[0].manifest, checked[1].manifest)
    unsigned = [str(c.path) for c in checked if not c.ok]
    if as_json:
        print_json({"ok": not unsigned, "not_verified": unsigned, **d})
    else:
        for line in lines(d):
            out.print(line, markup=False)
        for path in unsigned:
            err.print(f"warning: {path} does not verify (corral bundle verify {path})", markup=False)
    if unsigned:
        raise typer.Exit(1)


@bundle_app.command("use")
def use(file: Path = typer.Argument(..., help="the spec's bundle (packages.bundle)"), spec: Optional[Path] = SpecOpt,
        allow_downgrade: bool = typer.Option(False, "--allow-downgrade", help="accept a bundle older than the newest "
                                             "this state dir has used (a deliberate rollback)"),
        as_json: bool = JsonOpt) -> None:
    """Verify the spec's bundle against the pinned key and record its serial as the newest used: plan, apply and
    up refuse an older one. --allow-downgrade records an older one, on purpose."""
    from corral.bundle import serial
    from corral.bundle.serve import bundle_path, checked_bundle
    try:
        cluster = load_cluster(spec)
        if bundle_path(cluster) != file.resolve():
            raise CorralError(f"{file} is not the spec's bundle ({bundle_path(cluster)})", value=str(file),
                              fix="set packages.bundle to it first")
        path, checked = checked_bundle(cluster)
        if not allow_downgrade:
            serial.check(cluster.state_dir, checked.serial, path)
        before = serial.remember(cluster.state_dir, checked.serial, path, downgrade=allow_downgrade)
    except CorralError as exc:
        if as_json:
            print_json({"ok": False, "error": str(exc)})
        raise
    if as_json:
        print_json({"ok": True, "path": str(path), "serial": checked.serial, "previous_serial": before})
        return
    said = "a DOWNGRADE, accepted on purpose" if checked.serial < before else "the newest used"
    out.print(f"{path}: verified; serial {checked.serial} recorded as {said} (was {before})", markup=False)
