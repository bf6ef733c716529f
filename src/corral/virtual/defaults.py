"""The cluster.yaml that `corral virtual up` writes when its directory has none: a controller (also
the accounting, monitoring and NFS node), GPU compute nodes and a login node; /home shared from the
NFS node (the emulated NAS, virtual/nas.py); the example user alice with her own SSH key."""

from __future__ import annotations

import ipaddress

DEFAULT_SUBNET = ipaddress.IPv4Network("10.213.0.0/24")
EXAMPLE_USER = "alice"
EXAMPLE_UID = 2001
# The release a new virtual cluster runs: Debian 13 with its own Slurm 24.11 (binary packages from the archive,
# nothing to build, so a newcomer's first run fetches and builds no more than on Debian 12). 26.05 is one
# `slurm.version` away (spec/releases.py); Debian 12 (Slurm 22.05) stays a supported `--os`.
VIRTUAL_OS = "debian-13"


def default_spec(name: str = "vcluster", compute: int = 2, gpus: int = 4, gpu_model: str = "h100",
                 subnet: ipaddress.IPv4Network = DEFAULT_SUBNET, bridge: str | None = None,
                 repo_port: int | None = None, *, usable: bool = True, user_key: str | None = None,
                 os_name: str | None = VIRTUAL_OS) -> str:
    """`usable`: with the login node, shared /home and (given `user_key`, a public key line) alice.
    `os_name`: every node group's `os:` (spec/releases.py), written out so the file says it; None writes none
    (the spec's default release, debian-12: what a cluster.yaml without `os:` has always meant)."""
    base = subnet.network_address
    first = base + 11
    last = base + 10 + compute
    width = max(2, len(str(compute)))
    names = f"gpu[{1:0{width}d}-{compute:0{width}d}]" if compute > 1 else f"gpu{1:0{width}d}"
    extra = (f"  bridge: {bridge}\n" if bridge else "") + (f"  repo_port: {repo_port}\n" if repo_port else "")
    gpu_line = f"    gpus: {{model: {gpu_model}, count: {gpus}}}\n" if gpus > 0 else ""
    ctl_roles = "controller, accounting, monitoring" + (", nfs" if usable else "")
    os_line = f"    os: {os_name}\n" if os_name else ""
    login = (f"  - names: login1\n    addresses: [{last + 1}]\n    roles: [login]\n{os_line}" if usable else "")
    storage = ("""storage:
  # the NFS node's exports and the nodes' mounts; in the virtual cluster the NAS is EMULATED
  # (a host directory bind-mounted into the nodes), everything above the mount is real
  exports:
    - {path: /srv/nfs/home}
  mounts:
    - {path: /home, export: /srv/nfs/home, roles: [controller, compute, login]}
""" if usable else "")
    users = (f"""users:
  - name: {EXAMPLE_USER}
    uid: {EXAMPLE_UID}
    full_name: Example User
    ssh_keys: ["{user_key}"]
    accounts: [research]
    default_qos: normal
""" if usable and user_key else "")
    return f"""\
# Written by `corral virtual up`: a local virtual cluster of systemd-nspawn nodes.
# GPUs here are EMULATED (device files + a stand-in nvidia-smi); everything else is real.
# Edit and run `corral virtual up` again to add nodes.
name: {name}
scheduler: slurm
ssh:
  user: root
  key: .corral/ssh/id_ed25519
nodes:
  - names: ctl
    addresses: [{base + 10}]
    roles: [{ctl_roles}]
{os_line}  - names: {names}
    addresses: {first}-{last}
    roles: [compute]
{os_line}{gpu_line}{login}{storage}slurm:
  partitions:
    - {{name: gpu, nodes: ALL, default: true, max_time: "1-00:00:00"}}
  qos:
    - {{name: normal}}
    - {{name: short, priority: 100, max_gpus_per_user: 4, max_wall: "01:00:00"}}
  accounts:
    - {{name: research, users: [root], qos: [normal, short], default_qos: normal}}
{users}virtual:
  subnet: {subnet}
{extra}"""
