"""The daemons each component runs on a node (components/slurm.py and common.py reference these): the unit,
the user and why, the processes that run as root, and the sockets they listen on, with who may reach them.
`corral audit` compares every node with them (checks/audit.py); nothing on a node that is not declared here, in
the release's base or in the site's `audit.declared` is left unreported.

Ports come from the spec and the renderers that write the daemons' configurations, never typed twice.
"""

from __future__ import annotations

from corral.components import Daemon, Listener

SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT = 6817, 6818, 6819  # Slurm's defaults, which corral keeps (slurm_keys)


def base(cluster, node) -> tuple[Daemon, ...]:
    """What a Debian server runs before corral: systemd and its helpers, SSH, getty; on real servers cron,
    rsyslog, udev and chrony (a virtual node is a container: none of these run there)."""
    out = [
        Daemon("init.scope", "root", "systemd, the service manager (PID 1)", root=("systemd",)),
        Daemon("systemd-journald.service", "root", "the journal (reads every service's output)",
               root=("systemd-journal",)),
        Daemon("systemd-logind.service", "root", "logind (login sessions)", root=("systemd-logind",)),
        Daemon("ssh.service", "root", "sshd: logins as any user (corral's, admins', users' on login nodes)",
               root=("sshd",), listens=(Listener(22, "corral, admins; users where they may log in"),)),
        Daemon("console-getty.service", "root", "the console's login prompt", root=("agetty",)),
        Daemon("systemd-networkd.service", "systemd-network", "the network (a DHCP client where an interface asks)",
               listens=(Listener(68, "the site's DHCP server", "udp"),)),
        Daemon("getty@*.service", "root", "a console's login prompt", root=("agetty",)),
        Daemon("serial-getty@*.service", "root", "a serial console's login prompt", root=("agetty",)),
    ]
    if cluster.spec.virtual is None:
        out += [
            Daemon("systemd-udevd.service", "root", "udev (device files)", root=("systemd-udevd", "(udev-worker)")),
            Daemon("cron.service", "root", "cron: runs root's crontabs and users' where they may use it",
                   root=("cron",)),
            Daemon("rsyslog.service", "root", "rsyslog (the kernel's log)", root=("rsyslogd",)),
            Daemon("chrony.service", "_chrony", "time sync (chronyd drops root after binding)",
                   listens=(Listener(323, "chronyc on this node", "udp", "local"),)),
        ]
    return tuple(out)


def sssd(cluster, node) -> tuple[Daemon, ...]:
    return (Daemon("sssd*.service", "root", "SSSD's monitor and responders (Debian runs them as root: they read "
                   "the keytab and sssd.conf's bind password)",
                   root=("sssd", "sssd_be", "sssd_nss", "sssd_pam", "sssd_ifp", "sssd_ssh", "sssd_sudo", "sssd_pac",
                         "sssd_autofs", "sssd_kcm")),)


def nfs_server(cluster, node) -> tuple[Daemon, ...]:
    if cluster.spec.virtual is not None:  # a virtual cluster's NAS is a bind mount of the host's directory
        return ()
    clients = "the cluster's NFS clients (exports' client lists)"
    return (Daemon("kernel", "root", "the kernel's NFS server",
                   listens=(Listener(2049, clients), Listener(2049, clients, "udp"), Listener(0, "NFS lock manager "
                            "(lockd: kernel RPC ports)"), Listener(0, "NFS lock manager", "udp"))),
            Daemon("rpcbind.service", "_rpc", "the RPC port mapper",
                   listens=(Listener(111, clients), Listener(111, clients, "udp"))),
            Daemon("nfs-mountd.service", "root", "rpc.mountd answers mounts (reads /etc/exports)",
                   root=("rpc.mountd",), listens=(Listener(0, clients), Listener(0, clients, "udp"))),
            Daemon("rpc-statd.service", "statd", "NFS lock recovery",
                   listens=(Listener(0, clients), Listener(0, clients, "udp"))),
            Daemon("nfsdcld.service", "root", "NFSv4 client tracking", root=("nfsdcld",)))


def slurm_controller(cluster, node) -> tuple[Daemon, ...]:
    return (Daemon("slurmctld.service", "slurm", "slurmctld (SlurmUser)",
                   listens=(Listener(SLURMCTLD_PORT, "slurmd and Slurm's clients on every node"),)),)


def slurm_compute(cluster, node) -> tuple[Daemon, ...]:
    steps = Listener(0, "srun's I/O and step traffic from the job's submitting node")
    return (Daemon("slurmd.service", "root", "slurmd starts each job step as its user (slurmstepd) and runs the "
                   "prolog, epilog and health check as root", root=("*",),
                   listens=(Listener(SLURMD_PORT, "slurmctld and the job's other nodes"), steps)),
            # with cgroup v2, slurmd puts the steps (slurmstepd, then the job's processes) in a scope of their own
            Daemon("slurmstepd.scope", "root", "slurmstepd runs each job step as its user", root=("slurmstepd",),
                   listens=(steps,)))


def nfs_client(cluster, node) -> tuple[Daemon, ...]:
    """An NFSv3 client's lock recovery (nfs-common), where the node mounts NFS (a virtual node's NAS is a bind)."""
    from corral.spec.shared import mounts_of
    if cluster.spec.virtual is not None or not any(m.is_nfs() for m in mounts_of(cluster, node)):
        return ()
    servers = "the NFS servers (lock recovery)"
    return (Daemon("rpcbind.service", "_rpc", "the RPC port mapper (NFSv3 locks)",
                   listens=(Listener(111, servers), Listener(111, servers, "udp"))),
            Daemon("rpc-statd.service", "statd", "NFSv3 lock recovery",
                   listens=(Listener(0, servers), Listener(0, servers, "udp"))))


def accounting(cluster, node) -> tuple[Daemon, ...]:
    return (Daemon("mariadb.service", "mysql", "the accounting database",
                   listens=(Listener(3306, "slurmdbd on this node", on="local"),)),
            Daemon("slurmdbd.service", "slurm", "slurmdbd (SlurmUser)",
                   listens=(Listener(SLURMDBD_PORT, "slurmctld and sacct/sacctmgr on every node"),)))


def registry(cluster, node) -> tuple[Daemon, ...]:
    from corral.render import registry_auth as ra
    from corral.render.registry import instances
    out = [Daemon(f"{i.unit}.service", "docker-registry",
                  f"distribution ({'cache of ' + i.upstream if i.upstream else 'the site registry'})",
                  listens=(Listener(i.port, "every node's podman, enroot and `corral images`", on="cluster"),
                           Listener(i.metrics_port, "Prometheus (its metrics)", on="cluster")))
           for i in instances(cluster)]
    if ra.enabled(cluster):
        out.append(Daemon(f"{ra.UNIT}.service", ra.USER, "the site registry's token server: who may pull and push",
                          listens=(Listener(cluster.spec.images.registry.auth_port, "every node's podman and enroot, "
                                            "the control host's image loads (tokens)", on="cluster"),)))
    return tuple(out)


def jupyterhub(cluster, node) -> tuple[Daemon, ...]:
    from corral.render import jupyterhub as hub
    return (Daemon(f"{hub.UNIT}.service", hub.USER, "the notebook hub, its own user (PAM through group shadow)",
                   root=("sudo",),  # setuid for a moment: Slurm's commands as the user (render/jupyterhub.py sudoers)
                   listens=(Listener(cluster.spec.workbench.jupyterhub.port, "users' browsers (the proxy, HTTPS)",
                                     on="cluster"),
                            Listener(hub.HUB_PORT, "the users' servers in their jobs (the hub's API)", on="cluster"),
                            Listener(hub.PROXY_API_PORT, "the hub (the proxy's API)", on="local"))),)


def _on(cluster) -> str:
    from corral.render.prometheus import listens_on
    return listens_on(cluster)


def nvidia_driver(cluster, node) -> tuple[Daemon, ...]:
    """Fabric Manager on an NVSwitch node (the driver deploy installs it where the node has NVSwitches; declared on
    every GPU node a managed driver runs on: declaring what does not run allows nothing else). nvidia-persistenced
    drops to its own user and listens on no port: nothing to declare."""
    if cluster.spec.virtual is not None or not node.gpu_count or "compute" not in node.roles:
        return ()
    return (Daemon("nvidia-fabricmanager.service", "root", "Fabric Manager sets up NVSwitch routing (the driver's)",
                   root=("nv-fabricmanage",), listens=(Listener(6666, "its own command interface", on="local"),)),)


def site_daemons(cluster, node) -> tuple[Daemon, ...]:
    """The site's own daemons on this node (spec `audit.declared`)."""
    return tuple(Daemon(s.unit, s.user, f"the site's: {s.why}", root=tuple(s.root),
                        listens=tuple(Listener(x.port, x.who, x.proto, x.on) for x in s.listens))
                 for s in cluster.spec.audit.declared if not s.roles or set(s.roles) & set(node.roles))


# Debian's own /etc/sudoers (12 and 13), whitespace folded
DEBIAN_SUDOERS = ("Defaults env_reset", "Defaults mail_badpass", "Defaults use_pty",
                  'Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"',
                  "root ALL=(ALL:ALL) ALL", "%sudo ALL=(ALL:ALL) ALL", "@includedir /etc/sudoers.d")


def declared_sudo(cluster, node) -> dict[tuple[str, str], str]:
    """(file, rule with whitespace folded) -> why, for the sudo rules a node may hold: Debian's own, corral's (the
    notebook hub's, rendered by the one function apply installs it with) and those of corral's SSH user."""
    from corral.render import jupyterhub as hub
    from corral.spec.workbench import hub_node
    out = {("/etc/sudoers", line): "Debian's own sudoers" for line in DEBIAN_SUDOERS}
    at = hub_node(cluster)
    if at is not None and at.name == node.name:
        out.update({(hub.SUDOERS, " ".join(line.split())): "the notebook hub's rule (corral: Slurm's commands as "
                    "the spec's users)" for line in hub.sudoers(cluster).splitlines()
                    if line.strip() and not line.startswith("#")})
    return out
