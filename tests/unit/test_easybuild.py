"""software.easybuild without a node: the spec's located errors, EasyBuild's configuration and MODULEPATH entry,
where the component applies and what it installs, the pinned sdist list and the venv's build script, and
`corral software build`'s real scripts run with bash against stand-ins (tests/unit/images_fakes.py plus
runuser, id and eb): the verdict with the module name, a failed build's logs, the bound and a Ctrl-C
cancelling the job, a bad easyconfig refused before anything is reached."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corral import workbench_wheels as ww
from corral.components import gates
from corral.components.views import node_packages
from corral.deploy.venvs import build_script
from corral.errors import UsageError
from corral.render.easybuild import config
from corral.render.lmod import modulespath
from corral.spec import easybuild as eb
from corral.workflows import software_run
from corral.workflows.software_build import easyconfig
from tests.unit.images_fakes import LocalRun
from tests.unit.test_workbench_spec import BASE, loads, problems

USERS = """\
users:
  - {name: swmanager, uid: 1500, accounts: [research]}
  - {name: bob, uid: 1501}
slurm:
  accounts: [{name: research}]
identity: {homes: /sw/home}
"""
SW = "software:\n  easybuild: {}\n"


def test_defaults_put_the_tree_under_the_root_and_build_on_the_first_compute_node():
    c = loads(USERS + SW)
    assert eb.prefix(c) == "/sw/easybuild" and eb.build_node(c).name == "gpu01"
    assert eb.robot_paths(c) == ["/sw/easybuild/easyconfigs"] and eb.owner(c) == ("swmanager", "swmanager")
    assert eb.tree_maker(c)[0].name == "ctl" and eb.tree_maker(c)[1] == "/srv/nfs/sw/easybuild"
    text = config(c)
    for line in ("installpath = /sw/easybuild", "installpath-modules = /sw/easybuild/modules",
                 "sourcepath = /sw/easybuild/sources", "buildpath = /var/lib/corral-easybuild/build",
                 "robot-paths = /sw/easybuild/easyconfigs", "modules-tool = Lmod", "module-syntax = Lua"):
        assert line + "\n" in text, text
    assert "/sw/easybuild/modules/all\n" in modulespath(c)
    assert "/sw/easybuild" not in modulespath(loads(USERS + "software: {}\n"))


@pytest.mark.parametrize("extra, where, says", [
    ("  easybuild: {user: carol}\n", "software.easybuild.user", "must be one of users"),
    ("  easybuild: {user: bob}\n", "software.easybuild.user", "no Slurm account"),
    ("  easybuild: {build_node: login1}\n", "software.easybuild.build_node", "not a compute node"),
    ("  easybuild: {prefix: /opt/eb}\n", "software.easybuild.prefix", "under the software root"),
    ("  easybuild: {prefix: /sw/a:b}\n", "software.easybuild.prefix", "`%` or `:`"),
    # corral's trees under the root stay corral's (security review 3, N13: the hub's venv in the manager's tree)
    ("  easybuild: {prefix: /sw/.corral}\n", "software.easybuild.prefix", "/sw/.corral is corral's"),
    ("  easybuild: {prefix: /sw/.corral/eb}\n", "software.easybuild.prefix", "/sw/.corral is corral's"),
    ("  easybuild: {prefix: /sw/modulefiles/eb}\n", "software.easybuild.prefix", "/sw/modulefiles is corral's"),
    ("  easybuild: {robot_paths: [/opt/ec, /opt/ec]}\n", "software.easybuild.robot_paths", "named twice"),
    ("  easybuild: {robot_paths: ['/opt/a:b']}\n", "software.easybuild.robot_paths", "`%` or `:`"),
    ("  easybuild: {robot_paths: ['/opt/%(x)s']}\n", "software.easybuild.robot_paths", ""),
    ("  easybuild: {robot_paths: [relative]}\n", "software.easybuild.robot_paths", ""),
])
def test_bad_values_are_located_errors(extra, where, says):
    found = problems(USERS + "software:\n" + extra)
    assert found and all(f.startswith("cluster.yaml:") for f in found), found
    assert any(says in f for f in found), found
    line = int(found[0].split(":")[1])
    assert (BASE + USERS + "software:\n" + extra).splitlines()[line - 1].lstrip().startswith(
        ("easybuild", "robot_paths", "- ")), found


def test_corral_render_writes_the_configuration_on_login_and_compute_nodes():
    from corral.workflows.render_slurm import slurm_files
    c = loads(USERS + SW)
    files, _ = slurm_files(c, {})
    have = [n for n, f in files.items() if "/etc/xdg/easybuild.d/corral.cfg" in f]
    assert have == ["gpu01", "gpu02", "login1"] and files["gpu01"]["/etc/xdg/easybuild.d/corral.cfg"] == config(c)


def test_the_component_applies_to_login_compute_and_the_nfs_node_which_builds_the_venv():
    c = loads(USERS + SW)
    by = {n.name: n for n in c.nodes}
    assert [n for n in by if gates.easybuild(c, by[n])] == ["ctl", "gpu01", "gpu02", "login1"]
    assert [n for n in by if gates.easybuild_builder(c, by[n])] == ["ctl"]
    assert "python3-venv" in node_packages(c, by["ctl"])
    assert not any(gates.easybuild(loads(USERS + "software: {}\n"), n) for n in c.nodes)


@pytest.mark.parametrize("python", ww.PYTHONS)
def test_the_pinned_list_holds_easybuilds_sdists_and_what_builds_them(python):
    pins = ww.pins(ww.lock_text(python, ww.EASYBUILD))
    assert set(pins) == {"easybuild-framework", "easybuild-easyblocks", "setuptools", "wheel"}
    assert pins["easybuild-framework"][0] == pins["easybuild-easyblocks"][0]
    assert ww.build_lines(python, ww.EASYBUILD).count("\n") == 2
    assert ww.lock_id(python, ww.EASYBUILD) != ww.lock_id(python)


def test_a_packed_list_carries_build_txt_and_the_sdists(tmp_path, monkeypatch):
    (tmp_path / "a-1.tar.gz").write_bytes(b"sdist")
    (tmp_path / "setuptools-1-py3-none-any.whl").write_bytes(b"wheel")
    listed = (f"a==1 --hash=sha256:{ww._sha256(tmp_path / 'a-1.tar.gz')}\n"
              f"setuptools==1 --hash=sha256:{ww._sha256(tmp_path / 'setuptools-1-py3-none-any.whl')}\n")
    monkeypatch.setattr(ww, "lock_text", lambda python, venv=ww.NOTEBOOK: listed)
    assert ww.checked_dir(tmp_path, "3.11", ww.EASYBUILD) == tmp_path
    with tarfile.open(fileobj=io.BytesIO(ww.packed(tmp_path, "3.11", ww.EASYBUILD))) as tar:
        names = tar.getnames()
        build = tar.extractfile("build.txt").read().decode()
    assert names == ["a-1.tar.gz", "setuptools-1-py3-none-any.whl", "requirements.txt", "build.txt"]
    assert build.startswith("setuptools==1 ") and "a==1" not in build


def test_the_venv_builds_the_sdists_from_the_listed_setuptools_without_build_isolation():
    script = build_script(ww.EASYBUILD, "0" * 16, "/srv/nfs/sw/.corral/easybuild/x", "3.11")
    first, second = script.index("-r /var/lib/corral-build/easybuild-wheels/build.txt"), script.index("--no-build-isolation")
    assert first < second and script.count("--require-hashes") == 2 and "--no-index" in script
    assert "notebook-wheels" not in script and "/tmp" not in script  # root's own 0700 directory (review 3, N3)


def test_an_easyconfig_is_a_small_regular_file_named_eb(tmp_path):
    good = tmp_path / "hello-1.0.eb"
    good.write_text("name = 'hello'\n")
    assert easyconfig(good) == ("hello-1.0.eb", "name = 'hello'\n")
    (tmp_path / "link.eb").symlink_to(good)
    (tmp_path / "big.eb").write_bytes(b"#" * (256 * 1024 + 1))
    (tmp_path / "bin.eb").write_bytes(b"\xff\xfe")
    (tmp_path / "a b.eb").write_text("x")
    (tmp_path / "x.py").write_text("x")
    (tmp_path / "dir.eb").mkdir()
    for bad, says in (("link.eb", "regular"), ("big.eb", "KiB"), ("bin.eb", "UTF-8"), ("a b.eb", "name"),
                      ("x.py", "name"), ("dir.eb", "regular"), ("missing.eb", "regular")):
        with pytest.raises(UsageError, match=says):
            easyconfig(tmp_path / bad)


EB = r"""#!/bin/bash
case " $* " in
  *" --dry-run-short "*) [ -n "${FAKE_EB_UNRESOLVED:-}" ] && { echo "ERROR: Missing dependencies: zlib"; exit 1; }
     echo " * [ ] \$CFGS/hello-1.0.eb (module: hello/1.0)";;
  *) echo "== building and installing hello/1.0..."; [ -n "${FAKE_SLEEP:-}" ] && sleep "$FAKE_SLEEP"
     if [ -n "${FAKE_EB_FAIL:-}" ]; then
       while [ $# -gt 0 ]; do [ "$1" = --tmp-logdir ] && d=$2; shift; done
       echo "log" > "$d/easybuild-hello-1.0-x.log"; echo "ERROR: Build of hello-1.0.eb failed (err: 'checksum')"; exit 1
     fi; echo "== COMPLETED: Installation ended successfully";;
esac
"""


def _run(tmp_path, runner=LocalRun, with_eb=True, **env):
    root = tmp_path / "sw"
    text = (BASE.replace("{path: /sw, export", f"{{path: {root}, export") + USERS.replace("/sw/home", f"{root}/home")
            + f"software:\n  root: {root}\n  easybuild: {{}}\n")
    cluster = loads(text, base="")
    venv = eb.venv(cluster, ww.lock_id(eb.python_of(cluster), ww.EASYBUILD))
    Path(venv, "bin").mkdir(parents=True)
    # the job's PATH starts with the venv's bin: the stand-ins for eb and id (the manager's uid) go there
    for name, fake in (("eb", EB), ("id", "#!/bin/sh\necho 1500\n"))[0 if with_eb else 1:]:
        Path(venv, "bin", name).write_text(fake)
        Path(venv, "bin", name).chmod(0o755)
    for d in ("easyconfigs", "builds"):
        (root / "easybuild" / d).mkdir(parents=True)
    (tmp_path / "build").mkdir()
    run = runner(tmp_path, **env)
    (run.bin / "runuser").write_text('#!/bin/bash\nshift 3\nexec "$@"\n')  # runuser -u USER -- ...
    (run.bin / "runuser").chmod(0o755)
    ec = tmp_path / "hello-1.0.eb"
    ec.write_text("name = 'hello'\n")
    result = software_run.build(cluster, str(ec), run=run, token="0000", build_path=str(tmp_path / "build"))
    return root / "easybuild", run, result


def test_a_build_reports_its_module_job_and_user_and_leaves_no_build_directory(tmp_path):
    tree, run, r = _run(tmp_path)
    assert r["ok"] and r["module"] == "hello/1.0" and r["job"] == "42" and r["uid"] == "1500", r
    assert r["user"] == "swmanager" and r["build_node"] == "gpu01" and r["node"] == "login1", r
    assert (tree / "easyconfigs" / "hello-1.0.eb").read_text() == "name = 'hello'\n"
    assert list((tmp_path / "build").iterdir()) == [] and not (tree / "builds" / "corral-eb-0000").exists()
    assert "COMPLETED" in (tree / "builds" / "corral-eb-0000.log").read_text()
    submit = run.scripts[1]
    assert "runuser -u swmanager -- sbatch" in submit and "-w gpu01" in submit and "-t 125 " in submit


def test_a_failed_build_says_why_and_where_its_logs_are(tmp_path):
    tree, run, r = _run(tmp_path, FAKE_EB_FAIL="1")
    assert not r["ok"] and "checksum" in r["error"] and r["log"] == f"{tree}/builds/corral-eb-0000.log", r
    assert r["eb_log"] == f"{tree}/builds/corral-eb-0000/easybuild-hello-1.0-x.log", r
    assert list((tmp_path / "build").iterdir()) == []  # the build directory removed on the way out too
    assert "scancel -n corral-eb-0000" in run.log.read_text()


def test_an_unresolved_dependency_is_the_verdict(tmp_path):
    _, _, r = _run(tmp_path, FAKE_EB_UNRESOLVED="1")
    assert not r["ok"] and "Missing dependencies: zlib" in r["error"] and r["module"] is None, r


def test_a_cluster_without_easybuilds_venv_says_so(tmp_path):
    _, _, r = _run(tmp_path, with_eb=False)
    assert not r["ok"] and "eb: command not found" in r["error"], r


class Interrupted(LocalRun):
    """Ctrl-C while the job runs (sbatch --wait): what the finally clause sends after it."""

    def __call__(self, cluster, node, command, **kw):
        if "sbatch" in command:
            self.scripts.append(command)
            raise KeyboardInterrupt
        return super().__call__(cluster, node, command, **kw)


def test_ctrl_c_cancels_the_job(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, runner=Interrupted)
    assert "scancel -n corral-eb-0000" in (tmp_path / "fake.log").read_text()


def test_the_cli_prints_one_json_object_even_for_a_refused_easyconfig(tmp_path):
    from corral.cli.main import app
    bad = tmp_path / "x.txt"
    bad.write_text("x")
    res = CliRunner().invoke(app, ["software", "build", str(bad), "--json", "-f", str(tmp_path / "none.yaml")])
    assert res.exit_code != 0 and json.loads(res.stdout)["ok"] is False, res.stdout
    assert "not an easyconfig's name" in json.loads(res.stdout)["error"]


def test_the_venv_builder_must_run_the_build_nodes_python():
    """The venv is built on the NFS node for the build node's Python: a build node on Debian 13 (3.13) beside
    an NFS node on Debian 12 (3.11) is a located error at software.easybuild, not a failed apply."""
    mixed = BASE.replace("roles: [compute], gpus:", "roles: [compute], os: debian-13, gpus:").replace(
        "roles: [login]}", "roles: [login], os: debian-13}")
    text = USERS.replace("slurm:\n", "slurm:\n  version: '24.11'\n") + SW
    found = problems(text, base=mixed)
    assert any("ctl, which writes the software root, runs Python 3.11, the build node gpu01 Python 3.13" in f
               for f in found), found


def test_an_unreadable_easyconfig_is_a_usage_error(tmp_path, monkeypatch):
    good = tmp_path / "hello-1.0.eb"
    good.write_text("name = 'hello'\n")

    def denied(self):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(UsageError, match="cannot read it: Permission denied"):
        easyconfig(good)
