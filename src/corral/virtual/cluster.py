"""`corral virtual up | down | status`: the whole local virtual cluster.

State (what up created: bridge, sysctls, server PID, nodes) lives in <state_dir>/virtual.json so
that `down` undoes exactly that, by recorded PID and name, never by pattern.
"""

from __future__ import annotations

import fcntl
import json
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from corral.errors import CorralError, HostToolError, UsageError
from corral.parallel import pmap
from corral.spec import schedulers
from corral.spec.cluster import Cluster
from corral.virtual import host, image, keys, nas, network, node as vnode, repo
from corral.virtual.host import say

ORDER_LAST = ("controller", "accounting", "control-plane")  # stopped after the others


@dataclass
class NodeStatus:
    name: str
    address: str
    roles: list[str]
    gpus: int
    running: bool
    pid: int | None
    ssh: bool


class VirtualCluster:
    def __init__(self, cluster: Cluster) -> None:
        if cluster.spec.virtual is None:
            raise UsageError(f"{cluster.path}: not a virtual cluster spec (no 'virtual:' section)",
                             fix="run `corral virtual up` in a directory of its own")
        if schedulers.of(cluster).not_virtual:
            raise UsageError(f"{cluster.path}: {schedulers.of(cluster).not_virtual}",
                             value=f"scheduler: {cluster.spec.scheduler}",
                             fix="use scheduler: slurm here; review a Kubernetes spec with `corral render`, or "
                                 "`corral plan` it against its nodes")
        oses = cluster.releases()
        if len(oses) > 1:
            raise UsageError(f"{cluster.path}: the virtual cluster runs one OS release per cluster; this spec has "
                             f"{', '.join(oses)}", value=", ".join(oses),
                             fix="give every node group the same `os:`")
        self.os = oses[0] if oses else None  # its base image and package repository (spec/releases.py)
        self.cluster = cluster
        self.v = cluster.spec.virtual
        self.workdir = cluster.base_dir
        self.state_dir = cluster.state_dir
        self.state_file = self.state_dir / "virtual.json"
        self.key = cluster.ssh_key() or self.state_dir / "ssh/id_ed25519"
        self.known_hosts = self.state_dir / "known_hosts"
        self.cg_prefix = f"corral-{cluster.name}"
        self.nodes = [vnode.VNode(n, self.workdir, self.cg_prefix) for n in cluster.nodes]

    # -- state -------------------------------------------------------------------------------------
    def load_state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def save_state(self, state: dict) -> None:
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        tmp.replace(self.state_file)

    @contextmanager
    def locked(self):
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.state_dir / "virtual.lock", "w") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UsageError("another `corral virtual` command is running on this cluster",
                                 fix="wait for it to finish") from None
            yield

    def repo_url(self) -> str:
        return f"http://{network.host_address(self.v.subnet)}:{self.v.repo_port}/"

    # -- up ------------------------------------------------------------------------------------------
    def ensure_key(self) -> str:
        if not self.key.exists():
            self.key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            host.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"corral@{self.cluster.name}",
                      "-f", str(self.key)], what="generating the cluster SSH key")
        return self.key.with_suffix(".pub").read_text()

    def up(self, timeout: float = 120.0) -> list[NodeStatus]:
        host.require_root()
        host.ensure_tools()
        vnode.require_cgroups()
        with self.locked():
            state = self.load_state()
            try:
                return self._up(state, timeout)
            finally:
                self.save_state(state)

    def _base_image(self) -> Path:
        """The node base image: the cached one; else, from a bundle that carries it (--with-virtual), unpacked
        from there (no Debian mirror needed); else built with debootstrap."""
        wanted = image.image_dir(os_name=self.os)
        if self.cluster.spec.packages.source == "bundle" and not (wanted / "etc/corral-image").is_file():
            from corral.bundle.serve import carried_image
            return image.ensure_image(carried=carried_image(self.cluster, wanted.name), os_name=self.os)
        return image.ensure_image(os_name=self.os)

    def _up(self, state: dict, timeout: float) -> list[NodeStatus]:
        base = self._base_image()
        pubkey = self.ensure_key()
        repo_dir, repo_key = self._repository(base)
        more = self._more_repos(repo_dir, base) if repo_key is None else ()
        network.bridge_up(self.v.bridge, self.v.subnet, state)
        if len(self.nodes) > 16:  # ~6 inotify instances per node; 128 caps the cluster near 20
            network.raise_sysctl("fs.inotify.max_user_instances", 16 * len(self.nodes), state)
        if state.get("repo_dir") not in (None, str(repo_dir)) and vnode.pid_alive(state.get("repo_pid")):
            repo.stop_server(state.pop("repo_pid"))  # another repository now (a bundle, or none any more)
            _wait_closed(network.host_address(self.v.subnet), self.v.repo_port)
        if not vnode.pid_alive(state.get("repo_pid")) or not _listening(
                network.host_address(self.v.subnet), self.v.repo_port):
            state["repo_pid"] = repo.start_server(repo_dir, network.host_address(self.v.subnet),
                                                  self.v.repo_port, self.state_dir / "logs/repo-http.log")
            state["repo_dir"] = str(repo_dir)
        self._bmc_up(state)
        keys = pmap(lambda n: n.prepare(base, self.v.subnet, self.repo_url(), pubkey, repo_key, more), self.nodes, 8)
        self._write_known_hosts(keys)
        for n in self.nodes:
            binds = nas.prepare(self.cluster, n.node, self.workdir / "nas")
            if n.running() and (n.started_binds() or []) != binds:  # the emulated NAS changed: boot again
                say(f"{n.node.name}: shared mounts changed; restarting the node to bind them")
                n.stop()
                n.prepare(base, self.v.subnet, self.repo_url(), pubkey, repo_key, more)
            n.start(self.v.bridge, binds)
        state["nodes"] = sorted(set(state.get("nodes", [])) | {n.node.name for n in self.nodes})
        state["cg_prefix"] = self.cg_prefix
        self.wait_ssh(timeout)
        return self.status()

    def _repository(self, base: Path) -> tuple[Path, bytes | None]:
        """What the nodes install from: with packages.source: bundle, the verified bundle's repository (and
        its signing key), and corral's on-the-fly repository is neither filled nor served; else that one."""
        if self.cluster.spec.packages.source == "bundle":
            from corral.bundle.serve import prepare
            return prepare(self.cluster)
        from corral.components.views import packages_for
        from corral.virtual.more_repos import wanted
        elsewhere = {p for s in wanted(self.cluster, self.os) for p in s.src.packages}  # not in the release's archive
        made = repo.ensure_repo(base, [p for p in packages_for(self.cluster) if p not in elsewhere],
                                repo.repo_dir(self.os), os_name=self.os)
        cuda = self.cluster.spec.nvidia.cuda_toolkit
        if cuda is not None and cuda.source == "cuda":  # EMULATED: NVIDIA's toolkit, a stand-in
            from corral.virtual import cuda_standin
            cuda_standin.ensure(made, self.cluster.spec.nvidia.cuda_toolkit.version)
        return made, None

    def add_packages(self, packages: list[str]) -> Path:
        """More packages (and what they need) in this cluster's repository, its release's: what a site or a
        test installs beside corral's own gets them with apt from the same source as the nodes' others."""
        return repo.ensure_repo(self._base_image(), packages, repo.repo_dir(self.os), os_name=self.os)

    def add_wheels(self, requirements: list[str]) -> Path:
        """Python wheels served at <repository>/wheels/ of this cluster's release (virtual/repo.py)."""
        return repo.ensure_wheels(requirements, repo.repo_dir(self.os))

    def _more_repos(self, repo_dir: Path, base: Path) -> tuple[str, ...]:
        """The sub-repositories beside the release's the spec asks for (virtual/more_repos.py: a newer Slurm than
        the release ships, apptainer), made or checked."""
        from corral.spec.releases import release
        from corral.virtual import more_repos
        sets = more_repos.wanted(self.cluster, self.os)
        more_repos.ensure(repo_dir, sets, image.CACHE / "apt", base / "var/lib/dpkg/status",
                          image.apt_options(release(self.os)))
        return tuple(s.subdir for s in sets)

    def _bmc_up(self, state: dict) -> None:
        """With power enabled, the emulated BMC (virtual/bmc.py) on the bridge's host address."""
        from corral.spec.rules_power import credentials_path, virtual_bmc_listen
        from corral.virtual import bmc
        listen = virtual_bmc_listen(self.cluster)
        if listen is None:
            return
        bmc.ensure_credentials(credentials_path(self.cluster))
        if not vnode.pid_alive(state.get("bmc_pid")) or not _listening(*listen):
            state["bmc_pid"] = bmc.start_server(self.cluster.path.resolve(), self.state_dir / "logs/bmc.log")

    def power_on(self, name: str) -> int:
        """Boot one node as `up` does (overlay, identity, its NAS binds): the emulated BMC's Reset On."""
        n = self.node(name)
        base = self._base_image()
        n.prepare(base, self.v.subnet, self.repo_url(), self.key.with_suffix(".pub").read_text(),
                  self._repository(base)[1])
        return n.start(self.v.bridge, nas.prepare(self.cluster, n.node, self.workdir / "nas"))

    def _write_known_hosts(self, keys: list[str]) -> None:
        """Pin the host keys `up` generated itself (a re-created node's new key replaces the old)."""
        from corral.engine import hostkeys
        for n, key in zip(self.nodes, keys):
            hostkeys.add(self.known_hosts, n.node.address, self.cluster.spec.ssh.port, key, replace=True)

    def ssh_cmd(self, address: str, *args: str, tty: bool = False, user: str = "root",
                quiet: bool = True) -> list[str]:
        """ssh argv as root (the cluster key) or as a spec user (their key from keys.user_key_file);
        `args` is one remote shell command line, as ssh sends it. `quiet`: LogLevel=ERROR, which also hides
        what a refusing node says (PAM's banner, "Connection closed"): False where a person reads it."""
        key = self.key
        if user != "root":
            key = keys.user_key_file(self.state_dir, user)
            if not key.exists():
                raise UsageError(f"no SSH key of {user!r} on this host ({key})", value=user,
                                 fix="log in as root (no --user) and use `su - USER`, or put the user's "
                                     f"private key at {key}")
        return ["ssh", "-i", str(key), "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3",
                "-o", "IdentitiesOnly=yes", *(["-o", "LogLevel=ERROR"] if quiet else []), *(["-t"] if tty else []),
                f"{user}@{address}", *args]

    def wait_ssh(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout

        def wait(n: vnode.VNode) -> str | None:
            while time.monotonic() < deadline:
                if not n.running():
                    return f"{n.node.name}: node exited while booting: {n.ssh_ready_hint()}"
                if _banner(n.node.address):
                    r = subprocess.run(self.ssh_cmd(n.node.address, "true"), capture_output=True,
                                       text=True, stdin=subprocess.DEVNULL)
                    if r.returncode == 0:
                        return None
                time.sleep(0.2)
            return f"{n.node.name}: no SSH login within {timeout:.0f} s ({n.ssh_ready_hint()})"

        errors = [e for e in pmap(wait, self.nodes, 64) if e]
        if errors:
            raise CorralError("virtual nodes did not come up: " + "; ".join(errors),
                              fix="see the console logs under <workdir>/nodes/<name>/console.log")

    # -- down ----------------------------------------------------------------------------------------
    def down(self, keep_disks: bool = False) -> None:
        host.require_root()
        with self.locked():
            state = self.load_state()
            names = set(state.get("nodes", [])) | {n.node.name for n in self.nodes}
            spec_nodes = {n.node.name: n for n in self.nodes}
            known = [spec_nodes.get(name) or self._orphan(name) for name in sorted(names)]
            first = [n for n in known if not set(n.node.roles) & set(ORDER_LAST)]
            last = [n for n in known if set(n.node.roles) & set(ORDER_LAST)]
            if state.get("bmc_pid"):  # first: no Reset On while the nodes go down
                from corral.virtual import bmc
                bmc.stop_server(state.pop("bmc_pid"))
            for batch in (first, last):
                pmap(lambda n: n.stop(), batch, 64)
            for h in vnode.CG_HIER:
                prefix = vnode.CG_ROOT / h / self.cg_prefix
                if prefix.is_dir():
                    vnode._rmdir(prefix)
            if state.get("repo_pid"):
                repo.stop_server(state.pop("repo_pid"))
            network.bridge_down(state)
            network.restore_sysctls(state)
            if not keep_disks:
                import shutil
                for n in known:
                    shutil.rmtree(n.dir, ignore_errors=True)
                shutil.rmtree(self.workdir / "nas", ignore_errors=True)  # the emulated NAS: homes too
            state.pop("nodes", None)
            self.state_file.unlink(missing_ok=True)
            if not keep_disks:
                self.known_hosts.unlink(missing_ok=True)

    def destroy(self, name: str) -> None:
        """Lose one node for good (a dead disk): power it off and delete its overlay (upper dir, host
        key and all). The next `up` builds it again from the image, with a new host key."""
        import shutil
        host.require_root()
        n = self.node(name)
        with self.locked():
            n.stop()
            shutil.rmtree(n.dir, ignore_errors=True)

    def _orphan(self, name: str) -> vnode.VNode:
        """A node in the recorded state that the spec no longer has: stop it all the same."""
        from corral.spec.cluster import Node
        return vnode.VNode(Node(name, "0.0.0.0", (), None, None, -1), self.workdir, self.cg_prefix)

    # -- status --------------------------------------------------------------------------------------
    def status(self) -> list[NodeStatus]:
        def one(n: vnode.VNode) -> NodeStatus:  # the node itself, not only its supervisor shell
            pid = n.pid() or n.nspawn_pid()
            return NodeStatus(n.node.name, n.node.address, list(n.node.roles), n.node.gpu_count,
                              pid is not None, pid, pid is not None and _banner(n.node.address))
        return pmap(one, self.nodes, 64)

    def node(self, name: str) -> vnode.VNode:
        for n in self.nodes:
            if n.node.name == name:
                return n
        raise UsageError(f"no virtual node named {name!r}", value=name,
                         fix="choose one of: " + ", ".join(n.node.name for n in self.nodes))


def _banner(address: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5) as s:
            s.settimeout(1.5)
            return s.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def _wait_closed(address: str, port: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _listening(address, port) and time.monotonic() < deadline:
        time.sleep(0.1)


def _listening(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=0.3).close()
        return True
    except OSError:
        return False


__all__ = ["VirtualCluster", "NodeStatus", "HostToolError"]
