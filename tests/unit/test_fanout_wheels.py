"""The runtime for a Python other than the control host's (fanout/wheels.py, runtime.build(python=)):
which distributions are taken from wheels, hostile wheel members, the fetch's failure and bound, a
build from wheels in the cache (no network), and the driver's refusal of nodes of several Pythons."""

from __future__ import annotations

import hashlib
import json
import platform
import tarfile
import time
import types
import zipfile
from pathlib import Path

import pytest

from corral.errors import CorralError, UsageError
from corral.fanout import driver, runtime, wheels
from corral.spec.loader import load_text

TARGET = "3.13" if runtime.python_tag() != "3.13" else "3.12"
TAG = "cp" + TARGET.replace(".", "")
SO = f".cpython-{TAG[2:]}-x86_64-linux-gnu.so"
HOST_SO = f".cpython-{runtime.python_tag().replace('.', '')}-"


@pytest.fixture()
def pins(monkeypatch) -> set[str]:
    """The sha256s corral's list accepts, for these tests' own wheels (the real list: test_the_lock_*)."""
    accepted: set[str] = set()
    monkeypatch.setattr(wheels, "pinned", lambda name, version, python, machine=None: set(accepted))
    return accepted


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fake_dist(name: str, files: list[str]) -> types.SimpleNamespace:
    return types.SimpleNamespace(metadata={"Name": name}, version="1.0", files=[Path(f) for f in files])


def make_wheel(d: Path, name: str, version: str, members: dict[str, bytes], tag: str = TAG) -> Path:
    norm = name.replace("-", "_").replace(".", "_").lower()
    path = d / f"{norm}-{version}-{tag}-{tag}-manylinux2014_{platform.machine()}.whl"
    d.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
    return path


def test_only_distributions_compiled_for_one_python_version_are_taken_from_wheels():
    dists = [fake_dist("pure", ["pure/__init__.py"]),
             fake_dist("abi3only", ["abi/_rust.abi3.so", "abi/__init__.py"]),
             fake_dist("compiled", ["c/__init__.py", "c/_speedups.cpython-311-x86_64-linux-gnu.so"]),
             fake_dist("mixed", ["m/libev/_corecffi.abi3.so", "m/_c.cpython-313-aarch64-linux-gnu.so"]),
             fake_dist("nofiles", [])]
    dists[-1].files = None
    assert [d.metadata["Name"] for d in wheels.compiled(dists)] == ["compiled", "mixed"]
    here = {d.metadata["Name"].lower() for d in wheels.compiled(runtime.closure())}
    assert {"pydantic_core", "gevent", "greenlet"} <= here and not {"cryptography", "bcrypt", "pynacl"} & here


@pytest.mark.parametrize("bad", ["../x", "/etc/x", "a/../../x", "pkg/..", "C:/x"])
def test_a_wheel_member_outside_its_directory_is_refused(tmp_path, bad):
    w = make_wheel(tmp_path, "evil", "1.0", {"evil/__init__.py": b"", bad: b"owned"})
    with pytest.raises(CorralError, match="outside the directory"):
        wheels.members(w)


@pytest.mark.attack
def test_a_wheel_member_under_a_name_the_installed_distribution_lacks_is_refused(tmp_path):
    """Security review 3, N4: a wheel for another Python carrying `sitecustomize.py` (run at every interpreter start,
    as root on the nodes) or another package is refused; its own packages, modules and .dist-info are taken."""
    installed = fake_dist("cffi", ["cffi/__init__.py", "_cffi_backend.cpython-311-x86_64-linux-gnu.so",
                                   "cffi-1.0.dist-info/RECORD", "../../bin/cffi-tool", "__pycache__/x.pyc"])
    assert wheels.import_names(installed) == {"cffi", "_cffi_backend"}
    good = make_wheel(tmp_path, "cffi", "1.0", {"cffi/__init__.py": b"", "_cffi_backend" + SO: b"",
                                                "cffi-1.0.dist-info/RECORD": b""})
    assert sorted(wheels.members(good, wheels.import_names(installed))) == [
        "_cffi_backend" + SO, "cffi-1.0.dist-info/RECORD", "cffi/__init__.py"]
    for extra in ("sitecustomize.py", "corral/__init__.py", "cffi-1.0.data/purelib/usercustomize.py"):
        evil = make_wheel(tmp_path / extra.replace("/", "_"), "cffi", "1.0", {"cffi/__init__.py": b"", extra: b"x"})
        with pytest.raises(CorralError, match="a name the distribution installed here does not have"):
            wheels.members(evil, wheels.import_names(installed))


def test_wheel_members_are_placed_as_pip_installs_them(tmp_path):
    w = make_wheel(tmp_path, "pkg", "1.0", {"pkg/__init__.py": b"", "pkg-1.0.data/platlib/pkg_ext.py": b"",
                                            "pkg-1.0.data/scripts/pkg-run": b"", "pkg-1.0.data/headers/pkg.h": b"",
                                            "pkg-1.0.dist-info/METADATA": b"Name: pkg\n"})
    assert sorted(wheels.members(w)) == ["pkg-1.0.dist-info/METADATA", "pkg/__init__.py", "pkg_ext.py"]


def test_a_cached_wheel_is_used_only_when_it_fits_and_corral_pins_it(tmp_path, pins):
    pins.update(sha(w) for w in (make_wheel(tmp_path, "pkg", "1.0", {}, tag="cp311"),
                                 make_wheel(tmp_path, "pkg", "2.0", {})))
    assert wheels.cached(tmp_path, "pkg", "1.0", TARGET) is None  # another Python, another version
    fits = make_wheel(tmp_path, "pkg", "1.0", {"pkg/__init__.py": b"its own"})
    assert wheels.cached(tmp_path, "pkg", "1.0", TARGET) is None  # fits, but no pinned sha256 (review 3, N4)
    pins.add(sha(fits))
    assert wheels.cached(tmp_path, "pkg", "1.0", TARGET).name.startswith("pkg-1.0-" + TAG)


@pytest.mark.attack
def test_nothing_unpinned_is_fetched_and_pip_checks_the_pinned_hashes(tmp_path, monkeypatch):
    download = wheels._pip_download
    monkeypatch.setattr(wheels, "_pip_download", lambda *a: pytest.fail("fetched"))
    with pytest.raises(CorralError, match="corral pins no wheel of pkg==1.0 for Python"):
        wheels.fetch(tmp_path / "cache", "pkg", "1.0", TARGET)
    monkeypatch.setattr(wheels, "_pip_download", download)
    monkeypatch.setattr(wheels, "pinned", lambda *a, **k: {"a" * 64, "b" * 64})
    record = (f'echo "$@" > {tmp_path}/argv; while [ $# -gt 0 ]; do [ "$1" = -r ] && cp "$2" {tmp_path}/req; '
              'shift; done; exit 1')
    monkeypatch.setattr(wheels, "sys", fake_python(tmp_path, record))
    with pytest.raises(CorralError):
        wheels.fetch(tmp_path / "cache", "pkg", "1.0", TARGET)
    argv = (tmp_path / "argv").read_text().split()
    assert "--require-hashes" in argv and not any("sha256" in a for a in argv)  # the hashes: in the file pip reads
    assert (tmp_path / "req").read_text() == f"pkg==1.0 --hash=sha256:{'a' * 64} --hash=sha256:{'b' * 64}\n"


def test_the_lock_pins_every_compiled_dependency_at_the_constrained_version_for_each_node_python():
    """scripts/constraints.txt (what bootstrap installs) and the lock agree: a wheel for every node Python."""
    constraints = dict(line.split("==") for line in (Path(__file__).resolve().parents[2] / "scripts" /
                       "constraints.txt").read_text().splitlines() if line.strip() and not line.startswith("#"))
    for name, version in constraints.items():
        for python in ("3.11", "3.12", "3.13"):
            for machine in ("x86_64", "aarch64"):
                got = wheels.pinned(name, version, python, machine)
                assert len(got) == 1 and all(len(h) == 64 for h in got), (name, python, machine)


def fake_python(tmp_path: Path, body: str) -> types.SimpleNamespace:
    exe = tmp_path / "python"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    return types.SimpleNamespace(executable=str(exe))


def test_a_failed_fetch_names_the_distribution_and_what_pip_said_and_leaves_nothing(tmp_path, monkeypatch, pins):
    pins.add("0" * 64)
    said = 'echo "ERROR: No matching distribution found for pkg==1.0"; exit 1'
    monkeypatch.setattr(wheels, "sys", fake_python(tmp_path, said))
    cache = tmp_path / "cache"
    with pytest.raises(CorralError) as e:
        wheels.fetch(cache, "pkg", "1.0", TARGET)
    said = str(e.value)
    assert "pkg==1.0" in said and f"Python {TARGET}" in said and "No matching distribution" in said
    assert "PyPI" in e.value.fix and str(cache) == e.value.where
    assert list(cache.iterdir()) == []


def test_a_fetch_past_its_bound_is_killed(tmp_path, monkeypatch, pins):
    pins.add("0" * 64)
    monkeypatch.setattr(wheels, "sys", fake_python(tmp_path, "sleep 30 & sleep 30"))
    t0 = time.monotonic()
    with pytest.raises(CorralError, match="did not finish within 1 s"):
        wheels.fetch(tmp_path / "cache", "pkg", "1.0", TARGET, timeout=1)
    assert time.monotonic() - t0 < 10 and list((tmp_path / "cache").iterdir()) == []


def test_a_fetched_wheel_lands_in_the_cache_under_its_own_name(tmp_path, monkeypatch, pins):
    made = make_wheel(tmp_path / "index", "pkg", "1.0", {"pkg/__init__.py": b""})
    pins.add(sha(made))

    def download(dest, name, version, python, timeout):
        (dest / made.name).write_bytes(made.read_bytes())
    monkeypatch.setattr(wheels, "_pip_download", download)
    got = wheels.fetch(tmp_path / "cache", "pkg", "1.0", TARGET)
    assert got.parent == tmp_path / "cache" and [p.name for p in got.parent.iterdir()] == [got.name]
    monkeypatch.setattr(wheels, "_pip_download", lambda *a: pytest.fail("fetched again"))
    assert wheels.fetch(tmp_path / "cache", "pkg", "1.0", TARGET) == got


def prefill(state: Path) -> list[str]:
    """A fake wheel for TARGET of every compiled distribution installed here, in the runtime's cache."""
    cache = wheels.cache_dir(state / runtime.DIR, TARGET)
    sos = []
    for dist in wheels.compiled(runtime.closure()):
        name, top = dist.metadata["Name"], sorted(wheels.import_names(dist))[0]  # a name the installed one has
        so = f"{top}/_ext{SO}"
        norm = name.replace("-", "_").replace(".", "_").lower()
        make_wheel(cache, name, dist.version, {f"{top}/__init__.py": b"", so: b"\x7fELF " + TAG.encode(),
                                               f"{norm}-{dist.version}.dist-info/METADATA": f"Name: {name}\n".encode()})
        sos.append(so)
    return sos


def test_a_runtime_for_another_python_takes_the_wheels_and_is_deterministic(tmp_path, monkeypatch, pins):
    monkeypatch.setattr(wheels, "_pip_download", lambda *a: pytest.fail("no network in unit tests"))
    sos = prefill(tmp_path / "a")
    prefill(tmp_path / "b")
    pins.update(sha(w) for w in (tmp_path / "a").rglob("*.whl"))
    pins.update(sha(w) for w in (tmp_path / "b").rglob("*.whl"))
    other, again = runtime.build(tmp_path / "a", python=TARGET), runtime.build(tmp_path / "b", python=TARGET)
    host = runtime.build(tmp_path / "a")
    assert other.python == TARGET and other.id == again.id and other.id != host.id
    with tarfile.open(other.path) as tar:
        names = tar.getnames()
        meta = json.loads(tar.extractfile("RUNTIME.json").read())
        assert tar.extractfile(sos[0]).read() == b"\x7fELF " + TAG.encode()
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())
    assert meta["python"] == TARGET and set(sos) <= set(names) and names == sorted(names[:-1]) + ["RUNTIME.json"]
    assert not any(HOST_SO in n for n in names)  # none of this host's version-specific extensions
    assert "corral/fanout/wheels.py" in names and any(n.startswith("pyinfra/") for n in names)
    assert any(n.endswith(".abi3.so") for n in names)  # abi3 extensions kept as installed
    with tarfile.open(host.path) as tar:
        assert any(HOST_SO in n for n in tar.getnames())
    # one index per Python: switching back and forth packs nothing and keeps both tarballs
    monkeypatch.setattr(runtime, "_pack", lambda *a: pytest.fail("packed again"))
    assert runtime.build(tmp_path / "a", python=TARGET).id == other.id and runtime.build(tmp_path / "a").id == host.id
    assert other.path.is_file() and host.path.is_file()


def test_a_wheel_missing_from_an_offline_cache_names_the_distribution(tmp_path, monkeypatch, pins):
    pins.add("0" * 64)
    monkeypatch.setattr(wheels, "sys", fake_python(tmp_path, "echo 'ERROR: Could not find a version'; exit 1"))
    with pytest.raises(CorralError) as e:
        runtime.build(tmp_path / "s", python=TARGET)
    assert any(f"{d.metadata['Name']}=={d.version}" in str(e.value) for d in wheels.compiled(runtime.closure()))
    assert e.value.where == str(wheels.cache_dir(tmp_path / "s" / runtime.DIR, TARGET))


SPEC = """\
name: demo
state_dir: STATE
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 4}}
  - {names: "gpu[03-04]", addresses: "10.0.0.[13-14]", roles: [compute], gpus: {model: h100, count: 4}, os: debian-13}
slurm: {version: '24.11'}
"""  # one Slurm on both releases (the site's own 24.11 for Debian 12)


def test_nodes_of_several_pythons_are_refused_and_one_python_is_built_for(tmp_path, monkeypatch):
    text = SPEC.replace("STATE", str(tmp_path / "state"))
    (tmp_path / "cluster.yaml").write_text(text)
    c = load_text(text, str(tmp_path / "cluster.yaml"))
    built = []
    monkeypatch.setattr(driver.runtime, "build", lambda d, python: built.append(python) or pytest.fail("built"))
    with pytest.raises(UsageError) as e:
        driver.fan_out(c, ["health"])
    said = str(e.value)
    assert "Python 3.11: gpu[01-02]" in said and "Python 3.13: gpu[03-04]" in said and "--limit" in e.value.fix
    assert built == [] and not (tmp_path / "state").exists()
    assert driver.nodes_python(c, ["gpu03", "gpu04"]) == "3.13" and driver.nodes_python(c, ["gpu01"]) == "3.11"
