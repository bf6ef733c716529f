"""Daemons that come back (pure): the systemd restart policy of every daemon corral installs, as a
drop-in `/etc/systemd/system/<unit>.service.d/corral-restart.conf` (deploy/operations.py:
restart_policy installs it, then `systemctl daemon-reload`), or, for the units corral writes itself
(its Slurm exporter and dcgm-exporter units), as lines of the unit text.

Why: Debian 12's slurmctld, slurmd and slurmdbd units have no Restart=; munge's has Restart=on-abort
and MariaDB's Restart=on-abnormal (neither restarts after a failed exit); chrony's none. A `kill -9`
or a crash of slurmctld left it `failed`, and Slurm down until a person acted.

systemd 252 (Debian 12), as its man pages say and `systemd-analyze verify` (252) shows:
- Restart=on-failure restarts after an unclean exit code, an unclean signal, a timeout or the
  watchdog (systemd.service(5), "Exit causes and the effect of the Restart= settings"). Clean signals
  are only SIGHUP, SIGINT, SIGTERM and SIGPIPE (and SuccessExitStatus=): SIGKILL, SIGSEGV and SIGABRT
  are unclean, so a `kill -9` or a crash restarts the daemon. A stop by systemd itself (`systemctl
  stop`, `systemctl restart`, shutdown) is never undone.
- StartLimitIntervalSec= and StartLimitBurst= are [Unit] settings (systemd.unit(5)). In [Service],
  systemd 252 logs "Unknown key 'StartLimitIntervalSec' in section [Service], ignoring" (only the old
  spelling StartLimitInterval= is still taken there): they go in [Unit]. The limit counts every
  start, manual ones too; a unit that hits it stays `failed` until the interval has passed or
  `systemctl reset-failed <unit>` clears the count (corral's service op and slurmctld's rollback do,
  deploy/operations.py, deploy/slurm_guard.py, so corral's own starts are never refused).
- A drop-in's settings take effect at `systemctl daemon-reload`; the running daemon is not restarted
  (the new Restart= applies at its next death). Hence the operation's disruption: "none (systemd
  reloaded)", and a changed restart drop-in never restarts slurmd (slurm compute restarts slurmd only
  when its own drop-in corral.conf, SPANK plugins or GRES changed).
- slurmd: Debian's unit has KillMode=process, left as it is: when slurmd dies, systemd kills only its
  main process, so the slurmstepd of running jobs stay, and the restarted slurmd finds them again.

Numbers: RestartSec short for the daemons Slurm needs at once (slurmctld, slurmd, munge: 2 s), 5 s for
MariaDB (as Debian's unit) and the rest; at most StartLimitBurst starts in StartLimitIntervalSec,
with burst * RestartSec at most half the interval, so a daemon that cannot start (a broken
configuration) stops trying within the interval and stays `failed` (the SlurmctldDown, SlurmdDown,
SlurmdbdDown alerts) instead of restarting forever.

Coming back after a reboot (NETWORK): the daemons corral binds to the node's cluster address
(monitoring.listen: node, the default) fail with "cannot assign requested address" when they start
before that address is configured. Debian's units for node-exporter, Prometheus, Alertmanager and
Grafana have no order against the network at all, so at boot they could be started before it and
be failing (then restarted RestartSec later) when a rollout resumed the node. Their drop-in (and
corral's own exporter units) add Wants= and After=network-online.target, which the distribution's
wait-online service (systemd-networkd-wait-online, NetworkManager-wait-online, ifupdown's) holds
until the network is configured.
"""

from __future__ import annotations

from dataclasses import dataclass

UNIT_DIR = "/etc/systemd/system"
DROPIN_NAME = "corral-restart.conf"


@dataclass(frozen=True)
class Policy:
    restart_sec: int       # RestartSec=
    interval_s: int        # StartLimitIntervalSec=
    burst: int             # StartLimitBurst=
    why: str               # a comment line in the drop-in: what its coming back means
    binds: bool = False    # it listens on the node's cluster address: started after network-online.target

    def __post_init__(self) -> None:
        """A crash loop must end inside the window: burst restarts RestartSec apart fit in half of it, so
        a daemon that cannot start stops trying (failed: the alerts) instead of restarting forever."""
        if not (self.restart_sec >= 1 and self.burst >= 3 and self.burst * self.restart_sec * 2 <= self.interval_s):
            raise ValueError(f"restart policy: {self.burst} restarts {self.restart_sec} s apart do not fit in half "
                             f"of {self.interval_s} s (or RestartSec < 1, burst < 3)")


FAST = dict(restart_sec=2, interval_s=120, burst=10)
CALM = dict(restart_sec=5, interval_s=300, burst=10)

POLICIES: dict[str, Policy] = {
    "slurmctld": Policy(**FAST, why="slurmctld reads its state back (StateSaveLocation): queued and running "
                                   "jobs stay"),
    "slurmd": Policy(**FAST, why="Debian's KillMode=process stays: the slurmstepd of running jobs outlive "
                                "slurmd, which finds them again"),
    "munge": Policy(**FAST, why="every Slurm message is authenticated by munge"),
    "slurmdbd": Policy(**CALM, why="slurmctld keeps the accounting records while slurmdbd is away and "
                                  "sends them when it is back"),
    "mariadb": Policy(**CALM, why="slurmdbd's database; 5 s as Debian's unit (which restarts it only "
                                 "after a signal: Restart=on-abnormal)"),
    "sssd": Policy(**CALM, why="user and group lookups (identity.ldap) on this node"),
    "chrony": Policy(**CALM, why="clocks in step: munge refuses credentials from a node whose clock is off"),
    "prometheus": Policy(**CALM, binds=True, why="metrics and alert rules"),
    "prometheus-alertmanager": Policy(**CALM, binds=True, why="alert notifications"),
    "prometheus-node-exporter": Policy(**CALM, binds=True, why="node metrics, and the state of the cluster's daemons"),
    "grafana-server": Policy(**CALM, binds=True, why="dashboards"),
    "nvidia-dcgm": Policy(**CALM, why="the DCGM host engine dcgm-exporter reads"),
    "corral-slurm-exporter": Policy(**CALM, binds=True, why="Slurm metrics"),
    "docker-registry": Policy(**CALM, binds=True, why="the site registry (images.registry), and each cache's unit "
                                                     "(render/registry.py) in its text: jobs pull their images"),
    "corral-registry-auth": Policy(**CALM, binds=True, why="the site registry's token server: pulls and pushes "
                                                         "need a token from it (render/registry_auth.py)"),
    "corral-jupyterhub": Policy(**CALM, binds=True, why="the notebook hub and its proxy; users' servers are "
                                                      "Slurm jobs and keep running while it is away"),
    "corral-dcgm-exporter": Policy(restart_sec=10, interval_s=300, burst=10, binds=True,
                                   why="GPU metrics; 10 s: the DCGM host engine may be coming back too"),
}

# units corral writes itself: the policy is part of the unit text (render/slurm_exporter.py, render/dcgm_exporter.py,
# render/jupyterhub.py, render/registry_auth.py)
IN_UNIT = frozenset({"corral-slurm-exporter", "corral-dcgm-exporter", "corral-jupyterhub", "corral-registry-auth"})

# services corral manages that get no restart policy from it, and why (a service added without a
# policy or a reason here fails tests/unit/test_restart.py)
EXEMPT: dict[str, str] = {
    "docker": "the site's container engine (nvidia.container_toolkit.engine): corral adds only its proxy drop-in "
              "and restarts it when that changed; the package's unit restarts it (Restart=always)",
    "containerd": "the site's container engine, as docker: the package's unit restarts it (Restart=always)",
    "ssh": "the package's unit restarts it already (Restart=on-failure, RestartPreventExitStatus=255 for "
           "a bad sshd_config)",
    "sshd": "the RHEL family's name of ssh (on Debian an alias of ssh.service)",
    "nfs-server": "Type=oneshot: it starts the kernel's NFS server threads and exits; there is no daemon "
                  "to restart",
    "corral-mig": "Type=oneshot, applied at boot (deploy/mig.py): not a daemon",
    "corral-registry-upstreams.timer": "a timer (deploy/registry.py) starting a oneshot probe every minute: no "
                                       "daemon to restart",
    "nvidia-persistenced": "part of the NVIDIA driver (deploy/nvidia_driver.py): started again by every "
                           "converge; a restart policy comes with the driver's rollout, not yet",
    "nvidia-fabricmanager": "part of the NVIDIA driver: started again by every converge; restarting "
                            "Fabric Manager under running jobs is NVIDIA's to define, not decided here",
}


def dropin_path(unit: str) -> str:
    return f"{UNIT_DIR}/{unit}.service.d/{DROPIN_NAME}"


def _policy(unit: str) -> Policy:
    try:
        return POLICIES[unit]
    except KeyError:
        raise KeyError(f"no restart policy for {unit} (render/restart.py: POLICIES, or EXEMPT with a reason)") \
            from None


def unit_lines(unit: str, policy: Policy | None = None) -> list[str]:
    """The [Unit] lines: the start limit (they are ignored in [Service], see above), and for a daemon
    that binds the node's cluster address, its order after network-online.target (see NETWORK). `policy`: one a
    component declares with its service (render/resources.py Service), in place of POLICIES'."""
    p = policy or _policy(unit)
    network = ["Wants=network-online.target", "After=network-online.target"] if p.binds else []
    return [f"StartLimitIntervalSec={p.interval_s}", f"StartLimitBurst={p.burst}", *network]


def service_lines(unit: str, policy: Policy | None = None) -> list[str]:
    """The [Service] lines."""
    return ["Restart=on-failure", f"RestartSec={(policy or _policy(unit)).restart_sec}"]


def render_restart_dropin(unit: str, policy: Policy | None = None) -> str:
    """`unit`'s drop-in: restarted when it dies (a crash, a kill -9, a failed exit), at most `burst`
    starts in the interval."""
    p = policy or _policy(unit)
    lines = [f"# Managed by corral (render/restart.py): systemd restarts {unit} when it dies",
             f"# {p.why}.",
             "# Restart=on-failure: after a crash, a kill -9 or a failed exit; never after `systemctl stop`.",
             f"# More than {p.burst} starts in {p.interval_s} s (manual ones too) and it stays failed until",
             f"# started again by hand (`systemctl reset-failed {unit}` clears the count) or by corral apply.",
             "[Unit]", *unit_lines(unit, p), "", "[Service]", *service_lines(unit, p)]
    return "\n".join(lines) + "\n"
