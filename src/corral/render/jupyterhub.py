"""The notebook hub's files (pure): where things live, settings.json (everything jupyterhub_config.py reads,
from the spec), and the systemd unit.
deploy/jupyterhub.py installs them; render/files/jupyterhub_config.py and corral_notebook_form.py are
installed as they are.
"""

from __future__ import annotations

import json
from importlib.resources import files

from corral.render.restart import service_lines, unit_lines
from corral.spec.releases import release
from corral.spec.workbench import hub_node, offered, venv

ETC = "/etc/corral/jupyterhub"
STATE = "/var/lib/corral-jupyterhub"
UNIT = "corral-jupyterhub"
UNIT_PATH = f"/etc/systemd/system/{UNIT}.service"
PROXY = "/usr/bin/configurable-http-proxy"  # Debian's node-configurable-http-proxy
HUB_PORT, PROXY_API_PORT = 8081, 8001
PROXY_PACKAGES = ("node-configurable-http-proxy",)
BUILD_PACKAGES = ("python3-venv",)
CONFIG, FORM, SETTINGS = f"{ETC}/jupyterhub_config.py", f"{ETC}/corral_notebook_form.py", f"{ETC}/settings.json"
COOKIE, ENV = f"{ETC}/cookie_secret", f"{ETC}/hub.env"  # ENV: the proxy's and validate's tokens
CHECK = "/usr/local/lib/corral/notebook_check.py"  # node/notebook_check.py: validate's notebook check
CERT, KEY = f"{ETC}/tls/hub.pem", f"{ETC}/tls/hub.key"


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
            "users": sorted(u.name for u in cluster.spec.users)}


def settings_json(cluster, lock: str) -> str:
    return json.dumps(settings(cluster, lock), indent=1, sort_keys=True) + "\n"


def cert_names(cluster) -> list[str]:
    node = hub_node(cluster)
    return [node.name, node.address, *cluster.spec.workbench.jupyterhub.names]


def unit(v: str) -> str:
    """The hub's unit, running it from the venv `v` (its restart policy in the text: render/restart.py)."""
    return "\n".join([
        "# written by corral: JupyterHub (workbench.jupyterhub); its servers run as Slurm jobs",
        "[Unit]", "Description=JupyterHub (corral)", "After=munge.service", *unit_lines(UNIT), "",
        "[Service]",
        # root: PAM logins of every user and `runuser -u USER sbatch` (JupyterHub's documented set-up for
        # spawners that start servers as the users themselves)
        f"ExecStart={v}/bin/python {v}/bin/jupyterhub -f {CONFIG}",
        f"WorkingDirectory={STATE}", f"EnvironmentFile={ENV}",
        f"Environment=PATH={v}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        *service_lines(UNIT), "TimeoutStopSec=30", "UMask=0077", "", "[Install]",
        "WantedBy=multi-user.target", ""])

