"""One virtual node: overlayfs root, identity, boot with systemd-nspawn in its own cgroups, stop.

Layout under <workdir>/nodes/<name>/: upper/ work/ merged/ (overlay), nspawn.pid, console.log.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import time
from pathlib import Path

from corral.errors import HostToolError
from corral.spec.cluster import Node
from corral.virtual import gpu, nsid
from corral.virtual.host import run

# host cgroup hierarchies in which each node gets its own directory (memory stays with the sandbox)
CG_HIER = ("systemd", "unified", "freezer", "pids", "devices", "cpu", "cpuacct", "cpuset", "blkio")
CG_ROOT = Path("/sys/fs/cgroup")
# runs systemd-nspawn ("$@") again when the node rebooted itself (exit 133); a SIGTERM to this
# shell waits for nspawn's own exit (stop() signals nspawn first). Each boot runs in a time namespace
# whose CLOCK_BOOTTIME starts below 1 s (unshare --time --boottime, where the kernel has time namespaces):
# the node's uptime counts from its own boot, as a machine's does, not the host's. Slurm needs that: it
# takes a powered-up node back only when the boot time slurmd reports is after the resume request.
SUPERVISOR = (
    'ns=; unshare --time --boottime=-1 true 2>/dev/null && ns=1; '
    'while :; do if [ -n "$ns" ]; then up=$(cut -d. -f1 /proc/uptime); '
    'unshare --time --boottime=-$up "$@"; else "$@"; fi; rc=$?; '
    '[ "$rc" -eq 133 ] || exit "$rc"; echo "corral: node rebooted"; done')


def is_mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a process that exits meanwhile: its /proc entry reads ESRCH (ProcessLookupError) or is gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[-1][:1] != "Z"
    except OSError:
        return False


# what prepare() writes on the host into a node's tree (besides gpu.paths and nsid.paths)
WRITES = ("etc/hostname", "etc/machine-id", "etc/systemd/network/10-host0.network",
          "etc/apt/keyrings/corral-virtual-bundle.gpg", "etc/apt/sources.list", "etc/dpkg/dpkg.cfg.d/corral-virtual",
          "root/.ssh/authorized_keys", "etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub")


def inside(root: Path, paths: list[Path], links: tuple[Path, ...] = ()) -> None:
    """Each path the host writes into a node's tree resolves inside it. The tree is the (verified) base image: an
    absolute link in it (`root -> /root`) would resolve against the host and carry root's write out of the tree
    (security review 3, N8). Checked before anything is written; a link that stays inside is fine. `links`: paths
    corral makes as links itself (a unit's wants link, absolute as systemd writes them) and never writes through:
    only the directory each is made in must resolve inside."""
    top = os.path.realpath(root)
    for path in [*paths, *links]:
        real = os.path.join(os.path.realpath(path.parent), path.name) if path in links else os.path.realpath(path)
        if real != top and not real.startswith(top + os.sep):
            rel = path.relative_to(root)
            raise HostToolError(f"the node image's {rel} leads out of the node's tree (to {real}): nothing written",
                                value=str(rel), fix="rebuild the base image (a bundle's image: use one you built)")


class VNode:
    def __init__(self, node: Node, workdir: Path, cg_prefix: str) -> None:
        self.node = node
        self.dir = workdir / "nodes" / node.name
        self.merged = self.dir / "merged"
        self.cg_prefix = cg_prefix

    @property
    def machine(self) -> str:
        """nspawn machine name, unique across clusters (it names the host-side veth, vb-...)."""
        return f"{self.cg_prefix.removeprefix('corral-')}-{self.node.name}"

    @property
    def pid_file(self) -> Path:
        return self.dir / "nspawn.pid"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def nspawn_pid(self) -> int | None:
        """The node itself: its systemd-nspawn process (found by its --machine= argument), whether or
        not the supervisor shell that started it is still there."""
        want = f"--machine={self.machine}".encode()
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            if args and args[0].endswith(b"systemd-nspawn") and want in args:
                pid = int(cmdline.parent.name)
                if pid_alive(pid):
                    return pid
        return None

    def running(self) -> bool:
        return self.pid() is not None or self.nspawn_pid() is not None

    # -- prepare ------------------------------------------------------------------------------------
    def prepare(self, image: Path, subnet: ipaddress.IPv4Network, repo_url: str, authorized_key: str,
                repo_key: bytes | None = None, more: tuple[str, ...] = ()) -> str:
        """Mount the overlay and write identity; returns the node's public host key line. With `repo_key` (a
        bundle's signing key) apt takes the repository only signed by it, else (corral's own on-the-fly
        repository on the bridge) unsigned, with the repositories `more` names beside it (sub-directories of
        it: a newer Slurm the spec asks for, virtual/slurm_more.py)."""
        for d in ("upper", "work", "merged"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        if not is_mounted(self.merged):
            run(["mount", "-t", "overlay", "overlay", "-o",
                 f"lowerdir={image},upperdir={self.dir / 'upper'},workdir={self.dir / 'work'}",
                 str(self.merged)], what=f"overlay mount for {self.node.name}")
        m = self.merged
        links = (m / gpu.PROCFS_WANTS, m / nsid.WANTS)  # made as links, never written through: their parents only
        inside(m, [m / f for f in WRITES] + [p for p in (*gpu.paths(m), *nsid.paths(m)) if p not in links], links)
        (m / "etc/hostname").write_text(self.node.name + "\n")
        if not (m / "etc/machine-id").read_text().strip():
            (m / "etc/machine-id").write_text(os.urandom(16).hex() + "\n")
        net = m / "etc/systemd/network"
        net.mkdir(parents=True, exist_ok=True)
        (net / "10-host0.network").write_text(
            f"[Match]\nName=host0\n\n[Network]\nAddress={self.node.address}/{subnet.prefixlen}\n"
            "LinkLocalAddressing=no\nIPv6AcceptRA=no\n")
        keyring = m / "etc/apt/keyrings/corral-virtual-bundle.gpg"
        if repo_key is not None:
            keyring.parent.mkdir(parents=True, exist_ok=True)
            keyring.write_bytes(repo_key)
            keyring.chmod(0o644)
            (m / "etc/apt/sources.list").write_text(f"deb [signed-by=/etc/apt/keyrings/corral-virtual-bundle.gpg] {repo_url} ./\n")
        else:
            keyring.unlink(missing_ok=True)
            (m / "etc/apt/sources.list").write_text("".join(f"deb [trusted=yes] {repo_url}{d} ./\n"
                                                            for d in ("", *(f"{x}/" for x in more))))
        # a throwaway disk: dpkg need not fsync every file it unpacks (a real node keeps dpkg's default)
        (m / "etc/dpkg/dpkg.cfg.d/corral-virtual").write_text("# corral virtual node: throwaway overlay\nforce-unsafe-io\n")
        ssh_dir = m / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(authorized_key.strip() + "\n")
        (ssh_dir / "authorized_keys").chmod(0o600)
        hostkey = m / "etc/ssh/ssh_host_ed25519_key"
        if not hostkey.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{self.node.name}",
                 "-f", str(hostkey)], what=f"host key for {self.node.name}")
        gpu.install(self.node, m)
        nsid.install(m)  # job namespaces on any CPU (virtual/nsid.py)
        return " ".join((m / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[:2])

    # -- start / stop -------------------------------------------------------------------------------
    def _cgroups(self) -> list[Path]:
        dirs = []
        for h in CG_HIER:
            base = CG_ROOT / h
            if not base.is_dir():
                continue
            parent, leaf = base / self.cg_prefix, base / self.cg_prefix / self.node.name
            leaf.mkdir(parents=True, exist_ok=True)
            if h == "cpuset":  # children start empty and must be filled before tasks can join
                for f in ("cpuset.cpus", "cpuset.mems"):
                    value = (base / f).read_text()
                    for d in (parent, leaf):
                        if not (d / f).read_text().strip():
                            (d / f).write_text(value)
            dirs.append(leaf)
        return dirs

    @property
    def binds_file(self) -> Path:
        return self.dir / "binds"

    def started_binds(self) -> list[str] | None:
        """The --bind= arguments the running node was started with (None: not recorded)."""
        try:
            return self.binds_file.read_text().splitlines()
        except OSError:
            return None

    def start(self, bridge: str, binds: list[str] = ()) -> int:
        if (pid := self.pid() or self.nspawn_pid()) is not None:  # never a second nspawn on one overlay
            return pid
        cgroups = self._cgroups()

        def enter_cgroups() -> None:  # runs in the child before exec: one cgroup set per node
            for c in cgroups:
                with open(c / "cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))

        log = open(self.dir / "console.log", "ab")
        # a node that reboots itself (`systemctl reboot`: nspawn exits 133) is booted again, as a
        # machine would be; any other exit (poweroff, stop()) ends the loop
        proc = subprocess.Popen(
            ["sh", "-c", SUPERVISOR, "corral-vnode", "systemd-nspawn", "-D", str(self.merged), "--boot",
             f"--machine={self.machine}", f"--hostname={self.node.name}",
             "--register=no", "--keep-unit", f"--network-bridge={bridge}", "--console=read-only", *binds],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=enter_cgroups)
        log.close()
        self.pid_file.write_text(str(proc.pid))
        self.binds_file.write_text("".join(f"{b}\n" for b in binds))
        return proc.pid

    @staticmethod
    def _child(pid: int) -> int | None:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().split(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                return int(stat.parent.name)
        return None

    @classmethod
    def _nspawn_under(cls, pid: int) -> int | None:
        """The systemd-nspawn process below the supervisor (directly, or below `unshare`)."""
        child = cls._child(pid)
        for _ in range(2):
            try:
                arg0 = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0] if child else b""
            except OSError:
                return None
            if not arg0.endswith(b"unshare"):
                return child
            child = cls._child(child)
        return child

    def stop(self, timeout: float = 20.0) -> None:
        """Orderly poweroff (SIGTERM to nspawn, the supervisor then exits); SIGRTMIN+14 to the
        node's init; SIGKILL last."""
        pid = self.pid()
        orphan = self.nspawn_pid() if pid is None else None  # the supervisor is gone, the node is not
        if pid is None and orphan is not None:
            pid = orphan
        if pid is not None:
            nspawn = self._nspawn_under(pid) if orphan is None else orphan
            init = self._child(nspawn) if nspawn else None
            os.kill(nspawn or pid, signal.SIGTERM)
            if not _wait_gone(pid, timeout) and init and pid_alive(init):
                os.kill(init, signal.SIGRTMIN + 14)
                if not _wait_gone(pid, 10):
                    for p in (init, nspawn, pid):
                        if p and pid_alive(p):
                            os.kill(p, signal.SIGKILL)
                    _wait_gone(pid, 5)
        self.pid_file.unlink(missing_ok=True)
        self.cleanup()

    def cleanup(self) -> None:
        """Unmount and remove this node's cgroups (only empty ones; nothing else is touched)."""
        if is_mounted(self.merged):
            proc = run(["umount", str(self.merged)], what=f"unmount {self.node.name}", check=False)
            if proc.returncode != 0:
                run(["umount", "-l", str(self.merged)], what=f"lazy unmount {self.node.name}")
        for h in CG_HIER:
            leaf = CG_ROOT / h / self.cg_prefix / self.node.name
            if leaf.is_dir():
                for d in sorted(leaf.rglob("*"), key=lambda p: -len(p.parts)):
                    if d.is_dir():
                        _rmdir(d)
                _rmdir(leaf)

    def ssh_ready_hint(self) -> str:
        tail = (self.dir / "console.log").read_text(errors="replace").splitlines()[-5:] \
            if (self.dir / "console.log").exists() else []
        return " | ".join(tail)


def _rmdir(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def require_cgroups() -> None:
    if not (CG_ROOT / "systemd").is_dir() and not (CG_ROOT / "cgroup.controllers").exists():
        raise HostToolError("no usable cgroup hierarchy under /sys/fs/cgroup",
                            fix="run on a host with cgroups mounted")
