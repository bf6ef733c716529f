"""`corral render` for `scheduler: slurm` (workflows/render_files.py writes what this returns): per node,
every file the Slurm deploys (deploy/__init__.py `components`) install there, in their order and under
their conditions (the node's roles, the spec), each from the same pure function the deploy calls.

Base (/etc/hosts' block, chrony's restart drop-in), the proxy's files, the bundle's apt source, the Slurm
pin, SSSD (sssd.conf, the LDAP CA), NFS exports and mount units, the ordering drop-ins of slurmd and
slurmctld, the users' SSH key files and sshd's drop-in, munge's key, corral's health check, job hooks
and job environment, the nouveau blacklist and the driver's pin (for the spec's `os:`), the MIG layout
and its unit, enroot.conf, slurmdbd.conf, the power programs and power.json, slurm.conf / gres.conf /
cgroup.conf / plugstack.conf /
topology.conf, slurmd's drop-in and start state, pam_slurm_adopt's access file, the DCGM and container
toolkit pins and sources, the gpu-burn build mark, node-exporter's flags and spec metrics, Prometheus'
and Alertmanager's files, the Slurm exporter and dcgm-exporter (programs, units, field list), Grafana's
files and dashboards, and every restart drop-in (render/restart.py).

Facts: the hardware facts and the fabric from the state dir's caches; the Slurm version from the spec
(else the version plan renders for when it cannot read the controller's). What depends on the live node
(its OS, installed packages, files corral edits in place, what a build makes) is named in NOTES.txt.
Secrets are placeholders naming where they live (`secret`); no secret file is read, none is created."""

from __future__ import annotations

from collections.abc import Callable

from corral import paths
from corral.render.resources import secret_placeholder
from corral.deploy.installs import BLOCK  # noqa: F401 - PATH + BLOCK: corral's marked block in PATH
from corral.errors import CorralError
from corral.spec.cluster import Cluster, Node

Files = dict[str, "str | bytes"]


# a secret's placeholder, WHERE naming where it lives: one line, no quote (slurmdbd.conf and sssd.conf take it where
# the password goes)
secret = secret_placeholder


SECRET = secret("state-dir/secrets/slurmdbd-db-password")


class Ctx:
    """What every component's rendering reads: the spec, the cached facts, the Slurm version; the notes."""

    def __init__(self, cluster: Cluster, hw: dict, version: tuple[int, int], fabric: dict[str, str]) -> None:
        self.cluster, self.hw, self.version, self.fabric = cluster, hw, version, fabric
        self.notes: dict[str, None] = {}  # ordered, each once
        self.skipped: dict[tuple[str, str], list[str]] = {}
        self._slurm: dict[str, str] | None = None

    def slurm_configs(self) -> dict[str, str]:
        """The controller's files (login nodes take two of them), rendered once."""
        from corral.deploy.slurm import configs
        if self._slurm is None:
            self._slurm = configs(self.cluster, self.hw, self.version, self.fabric)
        return self._slurm

    def note(self, text: str) -> None:
        self.notes.setdefault(text)

    def skip(self, what: str, node: Node, reason: str) -> None:
        """A component the deploy skips on this node, and why (plan shows the same reason)."""
        self.skipped.setdefault((what, reason), []).append(node.name)

    def gated(self, what: str, node: Node, reason: str | None, quiet: str) -> bool:
        """True when the deploy skips `what` on this node (its skip_reason); named in NOTES.txt unless the
        reason is `quiet` (one that needs no note, e.g. "no GPUs on this node")."""
        if reason and reason != quiet:
            self.skip(what, node, reason)
        return bool(reason)


def vendor_source(c: Ctx, what: str, key: str) -> bool:
    """Whether a vendor's apt source is written (not from a bundle); its signing key, fetched on the node and kept
    only when it is the pinned fingerprint, is named in NOTES.txt instead."""
    if c.cluster.spec.packages.source == "bundle":
        return False
    c.note(f"{what}: its signing key ({key}) is downloaded on the node and kept only when it is the pinned "
           "fingerprint: not rendered.")
    return True


def restart_dropins(*units: str) -> Files:
    """The restart drop-ins operations.restart_policy installs."""
    from corral.render.restart import dropin_path, render_restart_dropin
    return {dropin_path(u): render_restart_dropin(u) for u in units}


def cuda_repository_note(c: Ctx) -> None:
    """A component that installs from NVIDIA's CUDA repository (deploy/nvidia_repo.py) sets it up first."""
    if c.cluster.spec.packages.source != "bundle":
        c.note("NVIDIA's CUDA repository: its apt source and key come inside the cuda-keyring package: not rendered.")


def _base(c: Ctx, node: Node) -> Files:
    from corral.render.hosts import render_hosts_block
    return {"/etc/hosts" + BLOCK: render_hosts_block(c.cluster, node), **restart_dropins("chrony")}


def _proxy(c: Ctx, node: Node) -> Files:
    from corral.deploy.proxy import engine_dropin_path, engine_of
    from corral.render.proxy import APT_CONF, ENVIRONMENT, apt_conf, engine_dropin, environment_block
    out: Files = {}
    block = environment_block(c.cluster)
    if block:  # "": no proxy, the deploy takes corral's block away
        out[ENVIRONMENT + BLOCK] = block
    conf = apt_conf(c.cluster)
    if conf is not None:
        out[APT_CONF] = conf
    engine = engine_of(c.cluster)
    dropin = engine_dropin(c.cluster) if engine else None
    if engine and dropin is not None:
        out[engine_dropin_path(engine)] = dropin
    return out


def _package_source(c: Ctx, node: Node) -> Files:
    import tarfile

    from corral.deploy.package_source import bundle_key
    from corral.render.bundle_source import KEYRING, LIST, ONLY, only_source, source_list, url
    if url(c.cluster) is None:
        return {}
    out: Files = {LIST: source_list(c.cluster), ONLY: only_source()}
    try:
        out[KEYRING] = bundle_key(c.cluster)
    except (OSError, KeyError, AttributeError, tarfile.TarError, CorralError) as exc:  # no pinned key
        c.note(f"{KEYRING} (the bundle's public key) is read from packages.bundle, which cannot be read here "
               f"({type(exc).__name__}): not rendered.")
    return out


def _slurm_version(c: Ctx, node: Node) -> Files:
    from corral.deploy.slurm_version import ROLES
    from corral.render.slurm_pin import PIN, pin_text
    version = c.cluster.spec.slurm.version
    if version is None or not set(node.roles) & set(ROLES):
        return {}
    return {PIN: pin_text(version)}


def _sssd(c: Ctx, node: Node) -> Files:
    from corral.deploy.sssd import bind_password_path, read_ca
    from corral.render.sssd import CA_CERT, NSSWITCH, SSSD_CONF, render_sssd_conf
    where = bind_password_path(c.cluster)
    out: Files = {SSSD_CONF: render_sssd_conf(c.cluster, secret(f"identity.ldap.bind_password_file={where}")
                                              if where is not None else None, node)}
    try:
        ca = read_ca(c.cluster)
    except CorralError as exc:
        c.note(f"{CA_CERT}: {exc}: not rendered.")
        ca = None
    if ca is not None:
        out[CA_CERT] = ca
    c.note(f"SSSD: {NSSWITCH} gets `sss` in its passwd, group and shadow lines and pam-auth-update enables "
           "pam_sss: both edit the node's own files, which are not read here.")
    return {**out, **restart_dropins("sssd")}


def _storage_server(c: Ctx, node: Node) -> Files:
    from corral.render.storage import EXPORTS, render_exports
    if c.cluster.spec.virtual is not None:
        c.skip("NFS server", node, "virtual cluster: the exports are the emulated NAS, bind-mounted by corral virtual")
        return {}
    return {EXPORTS: render_exports(c.cluster)}


def _storage_mounts(c: Ctx, node: Node) -> Files:
    from corral.render.storage import MOUNTS_DROPIN, UNIT_DIR, render_mount_unit, requires_mounts_dropin, unit_name
    from corral.spec.shared import mounts_of
    mounts = mounts_of(c.cluster, node)
    out: Files = {}
    if c.cluster.spec.virtual is not None:
        if mounts:
            c.skip("mount units", node, "virtual cluster: the mounts are bind mounts of the emulated NAS")
    else:
        out = {f"{UNIT_DIR}/{unit_name(m.path)}": render_mount_unit(c.cluster, m) for m in mounts}
    if "compute" in node.roles and (text := requires_mounts_dropin(c.cluster, node)) is not None:
        out[MOUNTS_DROPIN] = text
    return out


def _users(c: Ctx, node: Node) -> Files:
    from corral.deploy.users import DROPIN, DROPIN_TEXT, key_file, keys_text
    from corral.facts.accounts import RECORD
    spec = c.cluster.spec
    if not (spec.users or spec.groups):
        return {}
    c.note(f"users: {RECORD} (corral's record of the accounts it manages) is planned from each node's accounts: "
           f"not rendered; {DROPIN} is installed where openssh-server is. Nodes with users an earlier spec had "
           "get the drop-in too.")
    from corral.spec.access import users_log_in
    keyed = [u for u in spec.users if u.ssh_keys] if users_log_in(c.cluster, node) else []
    return {**{key_file(u.name): keys_text(u) for u in keyed}, DROPIN: DROPIN_TEXT}


def _jobhooks(c: Ctx, node: Node) -> Files:
    from corral.deploy.jobhooks import CLEAN, CONFIG, DIRS, EPILOG, MODULE, PROLOG, TASK_PROLOG, config, wrapper
    from corral.render.job_env import PATH as JOB_ENV, job_env_text, task_prolog
    from corral.render.node_programs import node_program
    return {MODULE: node_program("jobhooks.py"), DIRS: node_program("jobdirs.py"), CLEAN: node_program("jobclean.py"),
            PROLOG: wrapper("prolog"),
            EPILOG: wrapper("epilog"), CONFIG: config(c.cluster, node, c.hw.get(node.name)),
            JOB_ENV: job_env_text(c.cluster, node, c.hw.get(node.name)), TASK_PROLOG: task_prolog()}


def _nvidia_driver(c: Ctx, node: Node) -> Files:
    from corral.deploy.nvidia_driver import skip_reason
    from corral.render.nvidia import BLACKLIST, BLACKLIST_TEXT, PIN, driver_packages, pin_for
    from corral.spec.releases import release
    if c.gated("NVIDIA driver", node, skip_reason(c.cluster, node), quiet="no GPUs on this node"):
        return {}
    c.note(f"NVIDIA driver: the version pin ({PIN}) names the package for the node's OS as the spec gives it (`os:`); "
           "apply reads it from the node. On DGX OS corral writes none of the driver's files.")
    driver = c.cluster.spec.nvidia.driver
    assert driver is not None  # gated above
    if driver.source == "cuda" and c.cluster.spec.virtual is None:
        cuda_repository_note(c)
    out: Files = {BLACKLIST: BLACKLIST_TEXT}
    rel = release(node.os)
    if driver.version is None:  # a branch, resolved from the nodes and their repositories by plan and apply
        c.note(f"{PIN} on {node.name}: not rendered: nvidia.driver.branch {driver.branch} is resolved to an exact "
               "version by `corral plan`/`apply` (the nodes' installed driver on the branch, else the newest in "
               "their repositories)")
        return out
    try:  # deploy/nvidia_driver.py packages_for, with the spec's release for the node's /etc/os-release
        out[PIN] = pin_for(driver_packages(driver, node, rel.distro, rel.version), driver.version,
                           driver.package is not None)
    except CorralError as exc:  # no driver package corral installs there: apply fails the node, plan says why
        c.note(f"{PIN} on {node.name}: not rendered ({exc}).")
    return out


def _mig(c: Ctx, node: Node) -> Files:
    from corral.deploy.mig import UNIT, unit_text
    from corral.render.mig import CONFIG, mig_parted_config
    return {CONFIG: mig_parted_config(node.gpus), UNIT: unit_text()}


def _containers(c: Ctx, node: Node) -> Files:
    from corral.deploy.containers import SLURM_ROLES
    from corral.render.containers import ENROOT_CONF, PYXIS_MARK, PYXIS_SO, enroot_conf
    nv = c.cluster.spec.nvidia
    out: Files = {}
    if nv.enroot is not None and "compute" in node.roles:
        out[ENROOT_CONF] = enroot_conf(nv.enroot)
    if nv.pyxis is not None and any(r in node.roles for r in SLURM_ROLES):
        from corral.render import spank_env
        out[spank_env.SOURCE_PATH] = spank_env.SOURCE
        c.note(f"pyxis: {PYXIS_SO} is built on each Slurm node, and {PYXIS_MARK} names the libslurm-dev it was "
               f"built against (installed there): neither is rendered; nor is {spank_env.SO}, corral's job "
               f"environment plugin built there from {spank_env.SOURCE_PATH}.")
    return out


def _accounting(c: Ctx, node: Node) -> Files:
    from corral.deploy.accounting import CONF
    from corral.render.slurmdbd import render_slurmdbd_conf
    c.note("accounting: the database user and its grant are made with SQL (the password's hash) in a file that "
           "exists only while mysql reads it: not rendered.")
    from corral.render import quickack
    files = {**restart_dropins("mariadb"), CONF: render_slurmdbd_conf(c.cluster, db_password=SECRET, version=c.version),
             **restart_dropins("slurmdbd")}
    if node.address is not None:
        files |= {quickack.SCRIPT: quickack.render_script(), quickack.DROPIN: quickack.render_dropin(str(node.address))}
        c.note(f"accounting: the route of {node.address} in the kernel's local table gets `quickack 1` "
               f"({quickack.SCRIPT}, run by slurmdbd's drop-in and by apply): a route, not a file.")
    return files


def _slurm_controller(c: Ctx, node: Node) -> Files:
    from corral.render.storage import STATE_DROPIN, state_dropin
    from corral.render import ctld_restart
    from corral.render.node_programs import node_program
    dropin = state_dropin(c.cluster)  # None: the state is not on a spec mount
    state = {STATE_DROPIN: dropin} if dropin is not None else {}
    judge = {f"{paths.LIB}/{m}": node_program(m) for m in ctld_restart.MODULES}
    return {**state, **c.slurm_configs(), **restart_dropins("slurmctld"), ctld_restart.DROPIN: ctld_restart.dropin_text(),
            **judge}


def _slurm_compute(c: Ctx, node: Node) -> Files:
    from corral.deploy.slurm import DROPIN, SLURMD_STATE, dropin, slurmd_state
    return {DROPIN: dropin(c.cluster, node), SLURMD_STATE: slurmd_state(c.cluster, node, c.hw.get(node.name)),
            **restart_dropins("slurmd")}


def _adopt(c: Ctx, node: Node) -> Files:
    from corral.render.adopt import ACCESS_FILE, AT_ALLOW, CRON_ALLOW, PAM_SSHD, access_conf, schedulers_allow
    if not c.cluster.spec.identity.pam_slurm_adopt:  # off: the deploy takes corral's PAM lines away
        return {}
    if "login" in node.roles:
        c.skip("pam_slurm_adopt", node, "a login node too: users log in here without a job")
        return {}
    c.note(f"pam_slurm_adopt: corral's blocks in {PAM_SSHD} are made from the node's own {PAM_SSHD} and "
           "common-session: not rendered.")
    ssh_user, exempt = c.cluster.spec.ssh.user, c.cluster.spec.identity.adopt_exempt_users
    allow = schedulers_allow(ssh_user, exempt)  # the same arguments as apply's (deploy/adopt.py)
    return {ACCESS_FILE: access_conf(ssh_user, exempt), CRON_ALLOW: allow, AT_ALLOW: allow}


def _slurm_login(c: Ctx, node: Node) -> Files:
    from corral.deploy.slurm import SLURM_CONF
    from corral.render.containers import PLUGSTACK
    configs = c.slurm_configs()
    return {SLURM_CONF: configs[SLURM_CONF], PLUGSTACK: configs[PLUGSTACK]}


def _nvidia_tools(c: Ctx, node: Node) -> Files:
    from corral.deploy.nvidia_tools import (CTK_KEY, CTK_PIN, CTK_SOURCE, RUNTIME_MARK, ctk_source, runtime_marker,
                                            skip_reason)
    from corral.render.vendor_repos import ctk_pin
    for what, label in (("cuda", "CUDA toolkit"), ("container", "NVIDIA Container Toolkit")):
        reason = skip_reason(c.cluster, node, what)
        if reason and reason != "not wanted here":
            c.skip(label, node, reason)
    if skip_reason(c.cluster, node, "cuda") is None:
        cuda_repository_note(c)
    ctk = c.cluster.spec.nvidia.container_toolkit
    if skip_reason(c.cluster, node, "container") is not None or ctk is None:  # None: "not wanted here"
        return {}
    out: Files = {}
    if vendor_source(c, "NVIDIA Container Toolkit", CTK_KEY):
        out[CTK_SOURCE] = ctk_source(ctk.repo_url)
    out[CTK_PIN] = ctk_pin(ctk.version)
    if ctk.engine != "none":
        c.note(f"NVIDIA Container Toolkit: `nvidia-ctk runtime configure` edits {ctk.engine}'s own configuration "
               "on the node: not rendered.")
        out[RUNTIME_MARK] = runtime_marker(ctk.engine)
    return out


def _acceptance(c: Ctx, node: Node) -> Files:
    from corral.deploy.acceptance import skip_reason
    from corral.render.acceptance import ALL_REDUCE, GPU_BURN, GPU_BURN_MARK, NCCL_TESTS_MARK, gpu_burn_mark
    if c.gated("GPU acceptance tools", node, skip_reason(c.cluster, node), quiet="not wanted here"):
        return {}
    acc = c.cluster.spec.acceptance
    if acc.nccl.enabled:
        cuda_repository_note(c)
    built = [path for path, on in ((GPU_BURN, acc.burn.enabled), (ALL_REDUCE, acc.nccl.enabled)) if on]
    c.note(f"acceptance: {' and '.join(built)} built on the node"
           + (f"; {NCCL_TESTS_MARK} names the libnccl-dev installed there" if acc.nccl.enabled else "")
           + ": not rendered.")
    if not acc.burn.enabled:
        return {}
    # the mark names the version, CUDA and architecture only (deploy: bundled() changes the URL and checksum)
    cuda = c.cluster.spec.nvidia.cuda_toolkit
    assert cuda is not None  # gated: skip_reason needs the toolkit
    return {GPU_BURN_MARK: gpu_burn_mark(acc.burn, cuda.version, node.gpus.model if node.gpus else None)}


def slurm_files(cluster: Cluster, hw: dict) -> tuple[dict[str, Files], list[str]]:
    """Every node's files (path -> text, or bytes), and the notes: what is not rendered, and why."""
    from corral.facts.ibnetdiscover import load_fabric_cache
    from corral.workflows.render_images import RENDERERS as IMAGES
    from corral.workflows.render_workbench import RENDERERS as WORKBENCH
    version, said = _slurm_version_said(cluster)
    c = Ctx(cluster, hw, version, load_fabric_cache(cluster.state_dir))
    return component_files(c, {**RENDERERS, **IMAGES, **WORKBENCH}), _notes(c, said)


def _resource_notes(c: Ctx, node: Node, items) -> None:
    """NOTES.txt's lines for a component declared as data: what it skips here, the vendor repositories it sets up."""
    from corral.render import resources as r
    for i in items:
        if isinstance(i, r.Skip) and i.noted:
            c.skip(i.what or i.name, node, i.reason)
        elif isinstance(i, r.Repository) and i.kind == "cuda":
            cuda_repository_note(c)
        elif isinstance(i, r.Key):
            vendor_source(c, i.vendor, i.path)


def component_files(c: Ctx, parts: dict[str, Callable[[Ctx, Node], Files]]) -> dict[str, Files]:
    """Every node's files from the spec's declared components (components/views.py), in the deploys' order, each
    where it applies: a component declared as data from its resources, any other from its renderer in `parts`."""
    from corral.components.views import declared
    from corral.render.resources import files as resource_files
    cluster = c.cluster
    files: dict[str, Files] = {node.name: {} for node in cluster.nodes}
    for component in declared(cluster):  # component by component, as the deploys run: the notes in that order
        part, rs = parts.get(component.name), component.resources
        for node in cluster.nodes:
            if not component.applies(cluster, node):
                continue
            if rs is not None:  # declared as data: its files are its resources' (render/resources.py)
                items = rs(cluster, node)
                files[node.name].update(resource_files(items, cluster.state_dir))
                _resource_notes(c, node, items)
            elif part is not None:
                files[node.name].update(part(c, node))
    return files


def cluster_files(cluster: Cluster) -> tuple[dict[str, Files], dict[str, str], list[str]]:
    """`corral render`'s view (spec/schedulers.py): every node's files from the cached hardware facts, no
    whole-cluster files, the notes."""
    from corral.facts.slurm import load_hw_cache
    per_node, notes = slurm_files(cluster, load_hw_cache(cluster.state_dir))
    return per_node, {}, notes


def _slurm_version_said(cluster: Cluster) -> tuple[tuple[int, int], str]:
    """slurm.version, else the Slurm the controller's release ships (what plan renders for when it cannot
    read the controller's: deploy/context.py)."""
    from corral.spec.releases import slurm_tuple
    pinned = cluster.spec.slurm.version
    if pinned:
        major, minor = (int(x) for x in pinned.split(".")[:2])
        return (major, minor), f"for Slurm {major}.{minor:02d} (slurm.version)"
    controllers = cluster.with_role("controller")
    os_name = controllers[0].os if controllers else None
    major, minor = slurm_tuple(os_name)
    return (major, minor), (f"for Slurm {major}.{minor:02d}, which {os_name or 'the default release'} ships: "
                            "slurm.version is unset and plan/apply render for the version the controller runs")


def _notes(c: Ctx, said: str) -> list[str]:
    cluster = c.cluster
    out = [f"Slurm configuration rendered {said}."]
    unknown = [n.name for n in cluster.with_role("compute") if n.name not in c.hw]
    if unknown:
        out.append(f"No hardware facts for {', '.join(unknown)} (run corral plan once): their NodeName lines say "
                   "what the spec knows, and their job environment has no fabric settings.")
    t = cluster.spec.topology
    if t is not None and t.discover and not t.ibnetdiscover_file:
        out.append("topology.conf: from the fabric the last plan or apply read (the state dir's cache)"
                   + ("" if c.fabric else "; none is cached, so there is none") + ".")
    out.append(f"PATH{BLOCK} is corral's marked block in PATH; the rest of that file stays the node's.")
    out.append("Secrets are never written: a file that holds one has <secret:not-rendered:WHERE> instead, WHERE "
               "naming where it lives (the munge key, the database and Grafana passwords in the state dir; the LDAP "
               "bind password and the BMC credentials in the admin's files).")
    out.append("Files only: the directories, packages, services and commands corral manages are in `corral plan`. "
               "Not rendered: the package transaction's policy-rc.d (there only while apt runs)"
               + (", the apt holds record /var/lib/corral/apt-holds (the held packages installed on the node)"
                  if cluster.spec.packages.hold else "") + ".")
    out += list(c.notes)
    out += [f"{what} skipped on {', '.join(nodes)}: {reason}." for (what, reason), nodes in c.skipped.items()]
    return out


def _software(c: Ctx, node: Node) -> Files:
    from corral.components import gates
    from corral.deploy.software import modulefiles
    from corral.render.lmod import MODULESPATH, modulespath
    if not gates.software_user(c.cluster, node):  # the maker node's module tree is a directory
        return {}
    return {MODULESPATH: modulespath(c.cluster), **modulefiles(c.cluster, node)}


# the deploys' order (deploy/__init__.py components); the components declared as data have none (their resources)
# each declared component's files (components/slurm.py, by name), written only where it applies
RENDERERS: dict[str, Callable[[Ctx, Node], Files]] = {
    "base": _base, "proxy": _proxy, "package source": _package_source, "slurm version": _slurm_version,
    "sssd": _sssd, "storage server": _storage_server, "storage mounts": _storage_mounts, "users": _users,
    "jobhooks": _jobhooks, "nvidia driver": _nvidia_driver, "mig": _mig,
    "containers": _containers, "accounting": _accounting, "slurm controller": _slurm_controller,
    "slurm compute": _slurm_compute, "pam_slurm_adopt": _adopt, "slurm login": _slurm_login,
    "nvidia tools": _nvidia_tools, "acceptance tools": _acceptance, "software": _software}
