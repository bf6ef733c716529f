"""accounting: MariaDB + slurmdbd on the accounting node, with a random DB password (state dir,
0600) that appears only in slurmdbd.conf (0600 slurm:slurm) and never in a command or the journal."""

from __future__ import annotations

import hashlib
import shlex

from pyinfra import host
from pyinfra.api import FactBase, deploy, operation

from corral.components.slurm import ACCOUNTING
from corral.components import gates
from corral.deploy import operations
from corral.deploy.nodestate import Want, register, snapshot
from corral.deploy.context import slurm_version
from corral.engine.shell import cmd
from corral.render import quickack
from corral.render.restart import dropin_path
from corral.render.slurmdbd import render_slurmdbd_conf
from corral.secrets import secret_text
from corral import paths

DB, DB_USER = "slurm_acct_db", "slurm"
CONF = "/etc/slurm/slurmdbd.conf"
SQL_FILE = paths.DB_SQL
WANT = register(Want(paths=(CONF, "/var/log/slurm", dropin_path("mariadb"), dropin_path("slurmdbd"),
                            quickack.SCRIPT, quickack.DROPIN),
                     services=("mariadb", "slurmdbd"),
            packages=ACCOUNTING))
READY = "ss -ltn | grep -q ':6819 '"
LOGS = "tail -n 20 /var/log/slurm/slurmdbd.log; journalctl -u slurmdbd -n 10 --no-pager"


def native_hash(password: str) -> str:
    """MariaDB mysql_native_password hash: lets corral set and check the password without sending it."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


class SlurmDbState(FactBase):
    """(password hash of slurm@localhost or '', database exists, grant present) or None (no server)."""

    def command(self):
        sql = (f"SELECT IFNULL((SELECT Password FROM mysql.user WHERE User='{DB_USER}' AND Host='localhost'),''),"
               f" (SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name='{DB}'),"
               f" (SELECT COUNT(*) FROM information_schema.schema_privileges WHERE "
               f"grantee=\"'{DB_USER}'@'localhost'\" AND table_schema='{DB}')")
        return f"mysql -N -B -e {shlex.quote(sql)} 2>/dev/null || echo NO_SERVER"

    def process(self, output):
        line = output[0] if output else "NO_SERVER"
        if line == "NO_SERVER":
            return None
        parts = line.split("\t") + ["", "0", "0"]
        return parts[0], parts[1] == "1", parts[2] != "0"


@operation()
def database(password: str):
    want_hash = native_hash(password)
    current = host.get_fact(SlurmDbState)
    if current == (want_hash, True, True):
        host.noop(f"database {DB} and user {DB_USER}@localhost in place")
        return
    operations.annotate(disruption="none")
    sql = (f"CREATE DATABASE IF NOT EXISTS {DB}; CREATE USER IF NOT EXISTS '{DB_USER}'@'localhost'; "
           f"ALTER USER '{DB_USER}'@'localhost' IDENTIFIED BY PASSWORD '{want_hash}'; "
           f"GRANT ALL ON {DB}.* TO '{DB_USER}'@'localhost'; FLUSH PRIVILEGES;")
    # the SQL carries the password hash: as a file (0600, removed at once), never on a command line (ps)
    yield from operations.install_commands(SQL_FILE, sql.encode(), "600", "root", "root")
    yield f"mysql < {SQL_FILE}; rc=$?; rm -f {SQL_FILE}; exit $rc"


@operation()
def own_address_quickack(address: str):
    """Immediate ACKs between this node and its own address (render/quickack.py says why)."""
    routes = snapshot(WANT).local_routes
    if address not in routes:
        host.noop(f"{address} is not an address of this node: no route to tune")
        return
    if routes[address]:
        host.noop(f"route of {address} has quickack already")
        return
    operations.annotate(disruption="none")
    yield cmd(quickack.SCRIPT, address)


@deploy("accounting")
def accounting() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if not gates.accounting(cluster, node):  # the declaration's gate (components/slurm.py)
        return
    password = secret_text(cluster.state_dir, "slurmdbd-db-password", 32)
    operations.packages(name="MariaDB and slurmdbd installed", names=list(WANT.packages), want=WANT, together=True)
    operations.restart_policy(name="mariadb restarted by systemd when it dies", unit="mariadb", want=WANT, started_next=True)
    operations.service(name="mariadb running", unit="mariadb", want=WANT)
    database(name="accounting database and user", password=password)
    operations.directory(name="/var/log/slurm", path="/var/log/slurm", user="slurm", group="slurm", want=WANT)
    conf = operations.managed_file(
        name="slurmdbd.conf", path=CONF, mode="600", user="slurm", group="slurm", want=WANT,
        content=render_slurmdbd_conf(cluster, db_password=password, version=slurm_version()),
        mask=(password,), mask_keys=("StoragePass",), disruption="restart slurmdbd")
    operations.restart_policy(name="slurmdbd restarted by systemd when it dies", unit="slurmdbd", want=WANT, started_next=True)
    if node.address is not None:
        address = str(node.address)
        operations.managed_file(name="local-quickack (immediate ACKs on the node's own address)", path=quickack.SCRIPT,
                                content=quickack.render_script(), mode="755", want=WANT)
        operations.unit_dropin(name="slurmdbd sets immediate ACKs on its node's address at each start",
                               unit="slurmdbd", path=quickack.DROPIN, content=quickack.render_dropin(address),
                               want=WANT, started_next=True)
        own_address_quickack(name=f"immediate ACKs on {address} (Slurm's messages to slurmdbd)", address=address)
    operations.service(name="slurmdbd running", unit="slurmdbd", want=WANT, wait=READY, logs=LOGS)
    operations.restart(name="slurmdbd restarted (slurmdbd.conf changed)", unit="slurmdbd", want=WANT, wait=READY, logs=LOGS,
                _if=conf.did_change)
