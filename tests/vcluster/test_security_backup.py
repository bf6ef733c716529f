"""Restore and hostile backups on a real virtual cluster (the shared one: ctl is controller and
accounting node, Debian 12's MariaDB):

- the client restore feeds SQL to (`mysql --sandbox`) refuses a `\\!` shell escape, where the plain
  client runs it, and still loads a genuine mysqldump of the accounting database;
- a forged backup (sums recomputed, cluster name right, no key) is refused before any node step;
- an authentic backup (sealed with the state dir's own key: an insider, a stolen key) whose SQL holds a
  `\\! touch` line runs no shell: the load fails, the restore rolls back and the cluster works.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from corral.backup import archive, auth, restore
from corral.cli.main import main
from tests.vcluster.conftest import settled, ssh

pytestmark = pytest.mark.vcluster
PWNED = "/tmp/corral-backup-pwned"
PROBE_DB = "corral_sandbox_probe"
ESCAPE = f"\\! touch {PWNED}\n".encode()


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    settled(shared_cluster, "test-security-backup")
    ssh(shared_cluster, "ctl", f"rm -f {PWNED}")
    return shared_cluster


def ctl(vc, command: str, check: bool = True):
    return ssh(vc, "ctl", command, check=check)


def _feed(vc, client: str, sql: bytes):
    """`sql` on the stdin of `client` on ctl (as restore streams it)."""
    import subprocess
    n = vc.node("ctl").node
    return subprocess.run(vc.ssh_cmd(n.address, client), input=sql, capture_output=True, timeout=60)


def test_the_sandboxed_client_runs_no_shell_but_loads_a_real_dump(cluster):
    version = ctl(cluster, "mysql --version").stdout.strip()
    ctl(cluster, f"mysql -e 'DROP DATABASE IF EXISTS {PROBE_DB}; CREATE DATABASE {PROBE_DB}'")
    try:
        sql = b"CREATE TABLE t (i INT);\n" + ESCAPE + b"INSERT INTO t VALUES (1);\n"
        sandboxed = _feed(cluster, restore.load_command(PROBE_DB), sql)
        assert sandboxed.returncode != 0, (version, sandboxed)
        assert b"sandbox" in sandboxed.stderr.lower(), sandboxed.stderr
        assert ctl(cluster, f"test -e {PWNED}", check=False).returncode == 1, version
        assert ctl(cluster, f"mysql -N -e 'SELECT COUNT(*) FROM {PROBE_DB}.t'").stdout.strip() == "0"  # stopped there
        plain = _feed(cluster, f"mysql {PROBE_DB}", sql.replace(b"CREATE TABLE t", b"CREATE TABLE t2"))
        assert plain.returncode == 0 and ctl(cluster, f"test -e {PWNED}", check=False).returncode == 0, \
            "the probe is real: the plain client runs the line"
        ctl(cluster, f"rm -f {PWNED}")
        # what backup takes (take.dump_command) loads under the sandbox, its own header line included
        ctl(cluster, f"mysql -e 'DROP DATABASE {PROBE_DB}; CREATE DATABASE {PROBE_DB}'")
        ctl(cluster, f"set -o pipefail; mysqldump --single-transaction --quick --routines --triggers slurm_acct_db "
                     f"| mysql --sandbox {PROBE_DB}")
        tables = ctl(cluster, f"mysql -N -e 'SHOW TABLES FROM {PROBE_DB}'").stdout.split()
        assert "acct_table" in tables and "qos_table" in tables, tables
    finally:
        ctl(cluster, f"mysql -e 'DROP DATABASE IF EXISTS {PROBE_DB}'; rm -f {PWNED}", check=False)


def _corral_json(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(list(argv))
    return rc, json.loads(capsys.readouterr().out)


def _with_sql(genuine: Path, dest: Path, sql: bytes, key: bytes | None) -> Path:
    """`genuine` with its SQL replaced, the manifest's sums recomputed (cluster name kept); sealed
    again with `key`, or with the genuine seal left as it was (a forger without the key)."""
    new = gzip.compress(sql)
    with tarfile.open(genuine) as tin:
        members = [(m.name, tin.extractfile(m).read()) for m in tin.getmembers()]
    manifest = json.loads(members[0][1])
    manifest["parts"]["accounting.sql.gz"] = {"bytes": len(new), "sha256": hashlib.sha256(new).hexdigest()}
    raw = json.dumps(manifest, indent=2).encode()
    with tarfile.open(dest, "w") as tout:
        for name, data in members:
            data = {archive.MANIFEST: raw, "accounting.sql.gz": new}.get(name, data)
            if name == archive.SEAL and key is not None:
                data = auth.seal(raw, key)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tout.addfile(info, io.BytesIO(data))
    return dest


@pytest.mark.attack
def test_hostile_backups_run_no_shell_and_change_nothing(cluster, tmp_path, capsys):
    spec = str(cluster.cluster.path)
    rc, taken = _corral_json(capsys, "backup", "-f", spec, "--to", str(tmp_path), "--json")
    assert rc == 0 and taken["ok"] and taken["key_id"], taken
    genuine = Path(taken["file"])
    with tarfile.open(genuine) as tar:
        assert [m.name for m in tar.getmembers()][:2] == [archive.MANIFEST, archive.SEAL]
        sql = gzip.decompress(tar.extractfile("accounting.sql.gz").read())
        state = tarfile.open(fileobj=io.BytesIO(tar.extractfile("corral-state.tar.gz").read()), mode="r:gz")
        assert auth.KEY_FILE not in state.getnames()  # the key never travels with the backups
    before = ctl(cluster, "sacctmgr -n -P show account format=Account").stdout.split()

    forged = _with_sql(genuine, tmp_path / "forged.tar", ESCAPE + sql, key=None)
    rc, refused = _corral_json(capsys, "restore", str(forged), "-f", spec, "--yes", "--json", "--no-validate")
    assert rc == 1 and "does not match its authentication" in refused["error"] and refused["steps"] == [], refused

    key = auth.load_key(cluster.cluster.state_dir)
    insider = _with_sql(genuine, tmp_path / "insider.tar", ESCAPE + sql, key=key)
    rc, failed = _corral_json(capsys, "restore", str(insider), "-f", spec, "--yes", "--json", "--no-validate")
    assert rc == 1 and failed["rolled_back"], json.dumps(failed, indent=1)[:3000]
    bad = [s for s in failed["steps"] if not s["ok"]]
    assert bad[0]["step"] == "load the backup's database", failed["steps"]
    assert ctl(cluster, f"test -e {PWNED}", check=False).returncode == 1  # no shell ran
    assert ctl(cluster, "sacctmgr -n -P show account format=Account").stdout.split() == before  # put back
    settled(cluster, "test-security-backup-after")  # every node back and idle: the cluster works
    job = ctl(cluster, "sbatch --parsable --wait -A research -N1 --wrap true").stdout.strip()
    assert ctl(cluster, f"sacct -n -X -P -j {job} -o State").stdout.strip() in ("COMPLETED", "")
