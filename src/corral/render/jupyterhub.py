"""The notebook hub's files (pure): where things live, settings.json (everything jupyterhub_config.py reads,
from the spec), its user, its sudoers rule and the systemd unit.
deploy/jupyterhub.py installs them; render/files/jupyterhub_config.py, corral_notebook_form.py and
corral_notebook_slurm.py are installed as they are.

The hub runs as USER, never root. It reads passwords through PAM as a member of group shadow (JupyterHub's
documented set-up for a hub without root), and runs Slurm's commands as each user through sudo: the rule allows
SLURM's commands alone, as the spec's users and the members of the directory's login groups only.
"""

from __future__ import annotations

import json
from importlib.resources import files

from corral.render.restart import service_lines, unit_lines
from corral.spec.releases import release
from corral.spec.types import UNIX_USER_RE
from corral.spec.workbench import hub_node, offered, venv

ETC = "/etc/corral/jupyterhub"
STATE = "/var/lib/corral-jupyterhub"
UNIT = "corral-jupyterhub"
UNIT_PATH = f"/etc/systemd/system/{UNIT}.service"
PROXY = "/usr/bin/configurable-http-proxy"  # Debian's node-configurable-http-proxy
HUB_PORT, PROXY_API_PORT = 8081, 8001
HUB_PACKAGES = ("node-configurable-http-proxy", "sudo")  # Debian's configurable-http-proxy; sudo (below)
BUILD_PACKAGES = ("python3-venv",)
CONFIG, FORM, SETTINGS = f"{ETC}/jupyterhub_config.py", f"{ETC}/corral_notebook_form.py", f"{ETC}/settings.json"
SLURM_MODULE = f"{ETC}/corral_notebook_slurm.py"  # node/notebook_slurm.py: Slurm's commands as argv, a server's port
COOKIE, ENV = f"{ETC}/cookie_secret", f"{ETC}/hub.env"  # ENV: the proxy's and validate's tokens
CHECK = "/usr/local/lib/corral/notebook_check.py"  # node/notebook_check.py: validate's notebook check
CERT, KEY = f"{ETC}/tls/hub.pem", f"{ETC}/tls/hub.key"
USER = "corral-jupyterhub"  # the hub's own account (systemd-sysusers), its home the hub's state
SYSUSERS = f"/etc/sysusers.d/{USER}.conf"
SYSUSERS_TEXT = (f"# Managed by corral: the notebook hub's own user (no login; its home is the hub's state)\n"
                 f'u {USER} - "corral notebook hub" {STATE} /usr/sbin/nologin\n')
SUDOERS = f"/etc/sudoers.d/{USER}"
SUDO = "/usr/bin/sudo"
# batchspawner's verbs (jupyterhub_config.py's batch_*_cmd) -> the argv run as the user ("{job}": the job id;
# node/notebook_slurm.py builds it, sudoers() allows these commands)
SLURM = {"submit": ["/usr/bin/sbatch", "--parsable"], "query": ["/usr/bin/squeue", "-h", "-j", "{job}", "-o", "%T %B"],
         "cancel": ["/usr/bin/scancel", "{job}"]}
COMMAND_TIMEOUT_S = 60


def hub_files(cluster, lock: str) -> dict[str, str]:
    """Every file of the hub apply installs but its secrets (key, cookie, tokens) and its certificate: path ->
    text. deploy/jupyterhub.py installs these, `corral render` writes them (workflows/render_workbench.py)."""
    from corral.render.node_programs import node_program
    return {CONFIG: static("jupyterhub_config.py"), FORM: node_program("notebook_form.py"),
            SLURM_MODULE: node_program("notebook_slurm.py"), SETTINGS: settings_json(cluster, lock),
            SUDOERS: sudoers(cluster), SYSUSERS: SYSUSERS_TEXT, CHECK: node_program("notebook_check.py"),
            UNIT_PATH: unit(venv(cluster, lock), cluster.spec.workbench.jupyterhub.port)}


def env_file(proxy_token: str, validate_token: str) -> str:
    """The unit's environment file (0600 root; systemd reads it): the proxy's token and validate's service token."""
    return f"CONFIGPROXY_AUTH_TOKEN={proxy_token}\nCORRAL_VALIDATE_TOKEN={validate_token}\n"


def static(name: str) -> str:
    return files("corral.render").joinpath("files", name).read_text()


def python_of(cluster) -> str:
    """The CPython minor of the hub node's release: the wheels' and the venv's."""
    return release(hub_node(cluster).os).python


def clock(seconds: int) -> str:
    """Seconds as a Slurm time: 7200 -> 2:00:00 (whole minutes, rounded up)."""
    minutes = -(-seconds // 60)
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def settings(cluster, lock: str) -> dict:
    """What jupyterhub_config.py reads: addresses, ports, paths, the form's choices and limits."""
    jh, node = cluster.spec.workbench.jupyterhub, hub_node(cluster)
    v = venv(cluster, lock)
    return {"address": node.address, "port": jh.port, "hub_port": HUB_PORT, "proxy_api_port": PROXY_API_PORT,
            "proxy": PROXY, "state": STATE, "venv": v, "python": f"{v}/bin/python", "admins": sorted(jh.admins),
            "idle_timeout": jh.idle_timeout, "start_timeout": 300, "partitions": offered(cluster),
            "max_gpus": jh.max_gpus, "max_cpus": jh.max_cpus, "max_memory_gb": jh.max_memory_gb,
            "default_time": clock(jh.default_time), "max_time": clock(jh.max_time),
            # in the hub's database from its start, so validate's check (and an admin) can start a server for
            # a spec user who never logged in; anyone PAM lets in may still log in (allow_all)
            "users": sorted(u.name for u in cluster.spec.users),
            # what the hub acts with: user names it accepts (corral's Unix user names, anchored), Slurm's commands
            # through sudo, and the one user validate's service may make a token for (checks/notebook.py)
            "user_pattern": rf"\A{UNIX_USER_RE.pattern}\Z", "sudo": SUDO, "slurm": SLURM,
            "command_timeout": COMMAND_TIMEOUT_S, "validate_user": cluster.first_user()}


def settings_json(cluster, lock: str) -> str:
    return json.dumps(settings(cluster, lock), indent=1, sort_keys=True) + "\n"


def cert_names(cluster) -> list[str]:
    node = hub_node(cluster)
    return [node.name, node.address, *cluster.spec.workbench.jupyterhub.names]


def runas(cluster) -> list[str]:
    """Whom the hub may run Slurm's commands as (sudoers' Runas list): the spec's users by name and the directory's
    login groups (%group). Never root or a system account; spec/rules_workbench.py refuses a directory without
    login groups, whose users could not be listed."""
    ldap = cluster.spec.identity.ldap
    return [u.name for u in cluster.spec.users] + [f"%{g}" for g in (ldap.login_groups if ldap else [])]


def sudoers(cluster) -> str:
    """The hub user's sudo rule: Slurm's commands (SLURM, by absolute path) as the users of runas(), no password,
    the job's variables kept (batchspawner hands a server its JUPYTERHUB_* settings and token in sbatch's
    environment). Checked with `visudo -c` before it is installed."""
    commands = ", ".join(sorted({argv[0] for argv in SLURM.values()}))
    who = runas(cluster)
    lines = ["# Managed by corral: the notebook hub (user %s) submits, queries and cancels each user's server as that" % USER,
             "# user, with Slurm's commands alone (argv, never a shell); never as root or a system account",
             f'Defaults:{USER} !requiretty, !pam_session, env_keep += "JUPYTERHUB_* JPY_*"']
    if who:
        lines += [f"Runas_Alias CORRAL_NOTEBOOK_USERS = {', '.join(who)}",
                  f"{USER} ALL = (CORRAL_NOTEBOOK_USERS) NOPASSWD: {commands}"]
    else:
        lines.append("# no users in the spec and no directory login groups: the hub may run nothing as anyone")
    return "\n".join(lines) + "\n"


def unit(v: str, port: int) -> str:
    """The hub's unit, running it from the venv `v` as USER (its restart policy in the text: render/restart.py).
    A port under 1024 is bound by the proxy, the hub's child, with CAP_NET_BIND_SERVICE and nothing else."""
    bind = ["AmbientCapabilities=CAP_NET_BIND_SERVICE"] if port < 1024 else []
    return "\n".join([
        "# written by corral: JupyterHub (workbench.jupyterhub); its servers run as Slurm jobs",
        "[Unit]", "Description=JupyterHub (corral)", "After=munge.service", *unit_lines(UNIT), "",
        "[Service]",
        # its own user: PAM reads /etc/shadow through group shadow; each user's job goes through sudo (sudoers())
        f"User={USER}", f"Group={USER}", "SupplementaryGroups=shadow", *bind,
        f"ExecStart={v}/bin/python -I {v}/bin/jupyterhub -f {CONFIG}",
        f"WorkingDirectory={STATE}", f"EnvironmentFile={ENV}",
        f"Environment=PATH={v}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ProtectSystem=full", "PrivateTmp=yes",
        *service_lines(UNIT), "TimeoutStopSec=30", "UMask=0077", "", "[Install]",
        "WantedBy=multi-user.target", ""])

