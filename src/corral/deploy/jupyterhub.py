"""workbench.jupyterhub: the notebook hub (render/jupyterhub.py, docs/components/notebooks.md).

Two deploys: `notebook venv` builds the venv once on the node that writes the shared software root
(spec/shared.maker: the NFS server's exported directory), from the pinned wheels corral fetched into its
cache on the control host and uploads (deploy/venvs.py: checked against the lists' hashes twice, by the cache
and by pip on the node); `jupyterhub` (waiting for it) installs Debian's configurable-http-proxy and sudo, the
hub's own user and its sudo rule (checked by visudo first), the hub's files, its TLS certificate (the site's, or
one from the cluster CA), its cookie secret and tokens (generated on the control host, 0600, never shown) and the
service on the hub node. The hub runs as that user, never root (render/jupyterhub.py).
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.render.ca_scope import ca_scope
from corral import secrets, site_ca, workbench_wheels
from corral.deploy import operations
from corral.render.ready import http_ready
from corral.deploy.nodestate import Want, register, register_for_run, snapshot
from corral.deploy.venvs import build_script, venv_built
from corral.engine.conditions import AnyChanged
from corral.engine.notes import annotate
from corral.engine.shell import cmd
from corral.errors import CorralError
from corral.render import jupyterhub as r
from corral.spec.workbench import venv_builder

HUB_FILES = (r.UNIT_PATH, r.CONFIG, r.FORM, r.SLURM_MODULE, r.SETTINGS, r.COOKIE, r.ENV, r.CERT, r.KEY, r.CHECK,
             r.SUDOERS, r.SYSUSERS)
WANT = register(Want(paths=(*HUB_FILES, r.STATE, "/usr/local/lib/corral"),
                     services=(r.UNIT,), packages=(*r.HUB_PACKAGES, *r.BUILD_PACKAGES)))


@deploy("notebook venv")
def notebook_venv() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if cluster.spec.workbench.jupyterhub is None:
        return
    python = r.python_of(cluster)
    lock = workbench_wheels.lock_id(python)
    builder, directory = venv_builder(cluster, lock)
    if builder.name != node.name:
        return
    want = register_for_run(Want(paths=(f"{directory}/.corral-lock",), packages=r.BUILD_PACKAGES))
    operations.packages(name="python3-venv (the notebook venv's builder)", names=list(r.BUILD_PACKAGES), want=want,
                        together=True)
    venv_built(name=f"notebook venv on {r.venv(cluster, lock)}", venv=workbench_wheels.NOTEBOOK.name,
               directory=directory, python=python, lock=lock,
               script=build_script(workbench_wheels.NOTEBOOK, lock, directory, python), want=want)


def _tls(cluster) -> tuple[str, str]:
    """(certificate chain, key) the hub serves: the site's files, or the cluster CA's certificate."""
    tls = cluster.spec.workbench.jupyterhub.tls
    if tls is None:
        made = site_ca.server_cert(cluster.state_dir, cluster.name, "jupyterhub", r.cert_names(cluster),
                                   ca_scope(cluster))
        return made.cert, made.key
    try:
        return Path(tls.cert).read_text(), Path(tls.key).read_text()
    except OSError as exc:
        raise CorralError(f"cannot read the hub's certificate: {exc.strerror}", where=exc.filename,
                          fix="put the site's PEM files there (workbench.jupyterhub.tls) or unset tls") from None



@operation()
def hub_removed(want: Want):
    """A node that is no longer the hub (workbench.jupyterhub left the spec, or moved to another node): the
    hub stopped and disabled, its files, secrets, sudo rule and state removed (its account stays, owning
    nothing). Users' running servers are Slurm jobs: they are left to end at their time limit (or scancel),
    never cancelled here."""
    files = snapshot(want).files
    there = [f for f in HUB_FILES if files.get(f) is not None]
    if not there:
        host.noop("no notebook hub here")
        return
    annotate(disruption=f"stop {r.UNIT} (running notebook servers are Slurm jobs: they end at their time limit)",
             diff=f"- {r.UNIT} (stopped, disabled)\n" + "".join(f"- {f}\n" for f in there) + f"- {r.STATE}\n")
    if r.UNIT_PATH in there:  # an apply cut off before the unit was written left files but no unit
        yield cmd("timeout", "90", "systemctl", "disable", "--now", "--quiet", r.UNIT)
    yield cmd("rm", "-rf", "--", r.SUDOERS, r.ETC, r.STATE, r.UNIT_PATH, r.CHECK, r.SYSUSERS)
    yield cmd("timeout", "60", "systemctl", "daemon-reload")


@deploy("jupyterhub")
def jupyterhub() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    hub = r.hub_node(cluster)
    if hub is None or hub.name != node.name:
        if "login" in node.roles:  # where a hub can have been (spec/rules_workbench.py); the op reads the snapshot
            hub_removed(name="notebook hub removed (not in the spec here)", want=WANT)
        return
    lock = workbench_wheels.lock_id(r.python_of(cluster))
    text = r.hub_files(cluster, lock)
    operations.packages(name="configurable-http-proxy and sudo (Debian's)", names=list(r.HUB_PACKAGES), want=WANT,
                        together=True)
    account = operations.managed_file(name=r.SYSUSERS, path=r.SYSUSERS, content=text[r.SYSUSERS], want=WANT,
                                      disruption=f"restart {r.UNIT}")
    # made, and the state of a hub that ran as root before it given to it (its database, pid files)
    operations.run_when_changed(name=f"user {r.USER} made", description="systemd-sysusers", _if=AnyChanged(account),
                                commands=[cmd("systemd-sysusers", r.SYSUSERS),
                                          cmd("install", "-d", "-m", "700", "-o", r.USER, "-g", r.USER, r.STATE),
                                          cmd("chown", "-R", "--no-dereference", f"{r.USER}:{r.USER}", r.STATE)])
    operations.directory(name=r.STATE, path=r.STATE, mode="700", user=r.USER, group=r.USER, want=WANT)
    cert, key = _tls(cluster)
    cookie = secrets.secret_bytes(cluster.state_dir, "jupyterhub-cookie", 32).hex()
    token = secrets.secret_text(cluster.state_dir, "jupyterhub-proxy-token", 48)
    check = secrets.secret_text(cluster.state_dir, "jupyterhub-validate-token", 48)
    changes = [
        operations.managed_file(name="hub configuration", path=r.CONFIG, content=text[r.CONFIG], want=WANT),
        operations.managed_file(name="spawn form", path=r.FORM, content=text[r.FORM], want=WANT),
        operations.managed_file(name="hub's Slurm commands", path=r.SLURM_MODULE, content=text[r.SLURM_MODULE],
                                want=WANT),
        operations.managed_file(name="hub settings", path=r.SETTINGS, content=text[r.SETTINGS], want=WANT),
        operations.managed_file(name="hub certificate", path=r.CERT, content=cert, want=WANT),
        operations.managed_file(name="hub key", path=r.KEY, content=key, mode="600", user=r.USER, group=r.USER,
                                secret=True, want=WANT),
        operations.managed_file(name="hub cookie secret", path=r.COOKIE, content=cookie + "\n", mode="600",
                                user=r.USER, group=r.USER, secret=True, want=WANT),
        operations.managed_file(name="hub tokens (the proxy's, validate's)", path=r.ENV, mode="600", secret=True,
                                content=r.env_file(token, check), want=WANT),
        operations.managed_file(name="hub unit", path=r.UNIT_PATH, want=WANT, content=text[r.UNIT_PATH],
                                disruption=f"restart {r.UNIT} (running servers keep running)"),
        account,
    ]
    # read by sudo at each command: a changed rule needs no restart. visudo checks it first (a broken file under
    # sudoers.d stops sudo for everyone)
    operations.managed_file(name="hub's sudo rule", path=r.SUDOERS, content=text[r.SUDOERS], mode="440",
                            validate="visudo -cqf {}", want=WANT)
    operations.directory(name="/usr/local/lib/corral", path="/usr/local/lib/corral", want=WANT)
    operations.managed_file(name="validate's notebook check", path=r.CHECK, content=text[r.CHECK], mode="755",
                            want=WANT)
    ready = http_ready(node.address, r.HUB_PORT, "/hub/health")  # the hub's API, where servers reach it
    operations.service(name="jupyterhub running", unit=r.UNIT, want=WANT, wait=ready)
    operations.restart(name="jupyterhub restarted (configuration changed)", unit=r.UNIT, want=WANT, wait=ready,
                       _if=AnyChanged(*changes))
