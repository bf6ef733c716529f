"""A workbench venv on the shared software root, built once from pinned, hash-checked files (workbench_wheels.py):
the notebook hub's (deploy/jupyterhub.py) and EasyBuild's (deploy/easybuild.py). On the node that writes the
software root (spec/shared.maker: the NFS server's exported directory, where root is not squashed): the files
fetched and packed on the control host when the op runs (a plan fetches nothing), uploaded, installed with
pip --no-index --require-hashes into a fresh venv, its marker (the list's id) written last. Root works in
paths.BUILD_DIR, a directory of its own (0700): a fixed name in a world-writable /var/tmp let a user slip their
own wheels and list into the build (security review 3, N3)."""

from __future__ import annotations

import hashlib

from pyinfra import host
from pyinfra.api import FileUploadCommand, FunctionCommand, operation

from corral import paths, workbench_wheels as ww
from corral.deploy.nodestate import Want, snapshot
from corral.deploy.operations import _staging
from corral.engine.notes import annotate
from corral.engine.shell import q, sh

VENVS = {v.name: v for v in (ww.NOTEBOOK, ww.EASYBUILD)}
BUILD_PACKAGES = ("python3-venv",)
MARK = ".corral-lock"


def upload_path(venv: ww.Venv) -> str:
    """Where the packed files land on the building node (removed after the build, whatever its outcome)."""
    return f"{paths.BUILD_DIR}/{venv.carried}-wheels.tar"


def tar_path(venv: ww.Venv, python: str, lock: str):
    return ww.CACHE / "wheels" / f"{venv.carried}-py{python}-{lock}.tar"


def mark_text(lock: str) -> str:
    return lock + "\n"


def _fetch_and_pack(name: str, python: str, lock: str) -> None:
    """On the control host, when the op runs: the wheelhouse, checked, packed. With packages.source: bundle
    the verified bundle's copy (checked against corral's list again), else fetched from the registry."""
    cluster, venv = host.data.corral_cluster, VENVS[name]
    if cluster.spec.packages.source == "bundle":
        from corral.bundle.serve import prepare
        files = ww.checked_dir(prepare(cluster)[0].parent / venv.carried / f"py{python}", python, venv)
    else:
        files = ww.wheelhouse(ww.CACHE, python, venv)
    tar = tar_path(venv, python, lock)
    data = ww.packed(files, python, venv)
    if not tar.exists() or tar.read_bytes() != data:
        tmp = tar.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(tar)


def build_script(venv: ww.Venv, lock: str, directory: str, python: str) -> str:
    """Build the venv at `directory` (the builder's path of it) from the uploaded files, bounded; the marker
    last, so a build cut short is built again next run. A list with sdists installs what builds them first
    (hash-checked too), then builds them with no build isolation: nothing outside the list is installed."""
    d, mark, tar = q(directory), q(f"{directory}/{MARK}"), q(upload_path(venv))
    tmp = q(f"{paths.BUILD_DIR}/{venv.carried}-wheels")
    pip = (f"timeout 900 {d}/bin/python -I -m pip install -q --disable-pip-version-check --no-index --no-cache-dir "
           f"--require-hashes --find-links {tmp}")
    installs = [f"{pip} -r {tmp}/build.txt", f"{pip} --no-build-isolation -r {tmp}/requirements.txt"] \
        if venv.build else [f"{pip} -r {tmp}/requirements.txt"]
    steps = " && ".join([
        f"rm -rf {d} {tmp}", f"mkdir -p {tmp}", f"tar -xf {tar} -C {tmp}",
        f"timeout 120 python{python} -I -m venv {d}", *installs,
        f"chmod -R a+rX,go-w {d}", f"echo {q(lock)} > {mark}"])
    # a build that fails leaves neither the venv nor the files behind
    return (f"{{ {steps}; }} || {{ rc=$?; rm -rf {d} {tmp} {tar}; exit $rc; }}; "  # shell-ok: quoted above
            f"rm -rf {tmp} {tar}")


@operation()
def venv_built(venv: str, directory: str, python: str, lock: str, script: str, want: Want):
    """The venv at `directory` holds the list `lock`'s files (its marker says so): nothing to do; else fetch
    the files on the control host, upload them, build the venv from them and mark it."""
    v = VENVS[venv]
    mark = (snapshot(want).files.get(f"{directory}/{MARK}") or {}).get("sha256")
    if mark == hashlib.sha256(mark_text(lock).encode()).hexdigest():
        host.noop(f"{v.what} venv {lock} built")
        return
    annotate(disruption="none", diff=f"{directory}: built from {v.what} pinned files for Python {python} "
                                     f"(list {lock})\n")
    yield FunctionCommand(_fetch_and_pack, (venv, python, lock), {})
    stage, staged = _staging(upload_path(v))  # through sudo: the SSH user's own 0700 directory, never /tmp
    yield from stage
    yield sh(f"install -d -m 700 -o root -g root {q(paths.BUILD_DIR)}")
    yield FileUploadCommand(str(tar_path(v, python, lock)), upload_path(v), remote_temp_filename=staged)
    yield sh(script)
