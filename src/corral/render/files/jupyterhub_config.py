# JupyterHub's configuration, written by corral (deploy/jupyterhub.py): every value comes from settings.json
# beside it (rendered from the spec by render/jupyterhub.py), nothing from the spec is pasted into this file.
# The hub runs as its own user, never root. Users log in through PAM (the hub's user is in group shadow, as
# JupyterHub documents for a hub without root); each one's JupyterLab runs as them in a Slurm job
# (batchspawner's SlurmSpawner), asked for through corral's form and checked against their QOS. Slurm's
# commands run through sudo as the user, as an argv (corral_notebook_slurm.py); no shell ever reads one.
import asyncio
import json
import os
import pwd
import subprocess
import sys

HERE = "/etc/corral/jupyterhub"
sys.path.insert(0, HERE)
import corral_notebook_form as form  # noqa: E402
import corral_notebook_slurm as slurm  # noqa: E402
from batchspawner import SlurmSpawner  # noqa: E402 (its import adds its API handler: replaced below)
from jupyterhub import apihandlers  # noqa: E402
from tornado import web  # noqa: E402
from traitlets.config import get_config  # noqa: E402

with open(os.path.join(HERE, "settings.json")) as f:
    S = json.load(f)

c = get_config()
c.JupyterHub.bind_url = f"https://{S['address']}:{S['port']}"
c.JupyterHub.ssl_cert = os.path.join(HERE, "tls", "hub.pem")
c.JupyterHub.ssl_key = os.path.join(HERE, "tls", "hub.key")
c.JupyterHub.hub_ip = S["address"]  # servers on compute nodes reach the hub's API here
c.JupyterHub.hub_port = S["hub_port"]
c.JupyterHub.db_url = "sqlite:///" + os.path.join(S["state"], "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(HERE, "cookie_secret")
c.JupyterHub.pid_file = os.path.join(S["state"], "jupyterhub.pid")
c.JupyterHub.authenticate_prometheus = False  # /hub/metrics: counts only, scraped from the cluster network
c.ConfigurableHTTPProxy.command = [S["proxy"]]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%d" % S["proxy_api_port"]
c.ConfigurableHTTPProxy.pid_file = os.path.join(S["state"], "proxy.pid")
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allow_all = True  # whoever PAM lets in: local accounts and the directory's users...
c.Authenticator.blocked_users = {"root"}  # ...but root, and no system account gets a server (below)
c.Authenticator.username_pattern = S["user_pattern"]  # corral's Unix user names: no shell or sudo syntax in one
c.Authenticator.admin_users = set(S["admins"])
c.Authenticator.allowed_users = set(S["users"])  # the spec's users: in the database from the start (allow_all stays)
c.JupyterHub.services = [
    {"name": "idle-culler", "command": [
        S["python"], "-I", "-m", "jupyterhub_idle_culler", "--timeout=%d" % S["idle_timeout"], "--cull-every=60"]}]
c.JupyterHub.load_roles = [
    {"name": "idle-culler", "services": ["idle-culler"], "scopes": [
        "list:users", "read:users:activity", "read:servers", "delete:servers"]}]
if S["validate_user"]:
    # `corral validate`'s notebook check (node/notebook_check.py, run on this node as root): its token comes from
    # the unit's environment file (0600 root), never from this file. It may only make (and delete) a short-lived
    # token of the one user the check runs as; that token, never this one, goes to the user's server.
    c.JupyterHub.services.append({"name": "corral-validate", "api_token": os.environ["CORRAL_VALIDATE_TOKEN"]})
    c.JupyterHub.load_roles.append({"name": "corral-validate", "services": ["corral-validate"],
                                    "scopes": ["tokens!user=" + S["validate_user"]]})


def _sacctmgr(*args):
    out = subprocess.run(["sacctmgr", "-nP", "show", *args], capture_output=True, text=True, timeout=15)
    return out.stdout if out.returncode == 0 else ""


class ServerPortHandler(apihandlers.APIHandler):
    """batchspawner-singleuser's POST from the user's job: the port of the caller's own starting server and
    nothing else (batchspawner's handler, replaced, set whatever spawner attribute the body named)."""

    @web.authenticated
    def post(self):
        token = self.get_auth_token()
        spawners = getattr(self.current_user, "spawners", {}).values()
        spawner = next((s for s in spawners if token and s.api_token == token), None)
        if spawner is None or spawner.pending != "spawn":
            raise web.HTTPError(403, "only a starting server's own token may set its port")
        try:
            spawner.port = slurm.port(self.get_json_body())
        except ValueError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.set_status(201)
        self.finish(json.dumps({"message": "port set"}))


apihandlers.default_handlers[:] = [h for h in apihandlers.default_handlers if h[0] != r"/api/batchspawner"]
apihandlers.default_handlers.append((r"/api/batchspawner", ServerPortHandler))


class CorralSlurmSpawner(SlurmSpawner):
    """batchspawner's SlurmSpawner with corral's form; the request checked against the user's QOS; Slurm's
    commands run as argv through sudo as the user."""

    def _options_form_default(self):
        return form.form_html(S)

    def _checked(self, formdata):
        try:
            uid = pwd.getpwnam(self.user.name).pw_uid
        except KeyError:
            raise ValueError("%s is not an account on this node" % self.user.name) from None
        if uid < 1000:  # Debian's system accounts: a hub login is no way to run jobs as one
            raise ValueError("%s is a system account (uid %d): no notebook server" % (self.user.name, uid))
        req = form.parse(formdata, S)
        qos = form.user_qos(_sacctmgr("assoc", "user=" + self.user.name, "format=user,defaultqos,qos"),
                            self.user.name)
        limits = form.qos_limits(_sacctmgr("qos", "format=name,maxtrespu,maxwall"))
        part_qos = next((p.get("qos") for p in S["partitions"] if p["name"] == req["partition"]), None)
        reason = form.qos_refusal(req, qos, limits, part_qos)
        if reason:
            raise ValueError(reason)
        return req

    def options_from_form(self, formdata):
        return self._checked(formdata)

    async def start(self):
        # checked again: a REST API spawn hands its options to the spawner without the form. batchspawner pastes
        # user_options over its script's values: only the checked request's keys stay there
        req = self._checked(form.formdata(self.user_options, S))
        self.user_options = req
        for key, value in form.batch_request(req).items():
            setattr(self, key, value)
        return await super().start()

    async def run_command(self, cmd, input=None, env=None):
        """batchspawner's command (a verb: batch_*_cmd below) as an argv, sudo as the user, bounded in time."""
        args = slurm.argv(cmd, self.user.name, S)
        proc = await asyncio.create_subprocess_exec(
            *args, env=env if env is not None else {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(input.encode() if input else None),
                                              S["command_timeout"])
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError("%s as %s: no answer in %d s" % (args[5], self.user.name, S["command_timeout"])) from None
        if proc.returncode != 0:
            raise RuntimeError(err.decode(errors="replace").strip())  # batchspawner reads a query's error text
        return out.decode(errors="replace").strip()


c.JupyterHub.spawner_class = CorralSlurmSpawner
# the venv was built where the shared software root is exported, so its scripts' #! lines name that path:
# they are run by the venv's python (found on PATH), never through their #! line
c.Spawner.cmd = ["jupyterhub-singleuser"]
c.SlurmSpawner.batchspawner_singleuser_cmd = "%s %s" % (S["python"], os.path.join(S["venv"], "bin", "batchspawner-singleuser"))
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = S["start_timeout"]
c.Spawner.http_timeout = 120
c.SlurmSpawner.exec_prefix = ""  # run_command's argv says who runs it
c.SlurmSpawner.batch_submit_cmd = "submit"
c.SlurmSpawner.batch_query_cmd = "query {job_id}"
c.SlurmSpawner.batch_cancel_cmd = "cancel {job_id}"
# the job's environment: a login shell's (Lmod's MODULEPATH, `module`), the venv first on PATH; srun
# passes all of it to the server (sbatch --export=the hub's variables would otherwise limit the step)
c.SlurmSpawner.req_prologue = ("set +u; . /etc/profile; set -u; export PATH=%s/bin:$PATH" % S["venv"])
c.SlurmSpawner.req_srun = "srun --export=ALL"
