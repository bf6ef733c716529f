"""The Slurm REST API (`slurm.rest`): Debian's slurmrestd on every controller, with JWT authentication. Declared as
data (components/slurm.py): the generic deploy applies `resources`, `corral render` writes its files, the audit
reads the declaration's daemon, render/slurm.py writes `slurm_conf`.

- **Tokens.** slurmctld signs and checks the JWTs with an HS256 key: 32 random bytes made once on the control host
  (state dir secrets/, 0600), installed 0600 slurm:slurm on each controller (KEY). A user gets a token of their own
  with `scontrol token` (Slurm's default lifespan, 1800 s; `lifespan=S` for another). slurmrestd runs with
  `SLURM_JWT=daemon` and `-a rest_auth/jwt`: every request carries `X-SLURM-USER-NAME` and `X-SLURM-USER-TOKEN`,
  which slurmrestd hands to slurmctld, and slurmctld refuses a token signed with another key, expired, or issued to
  another user. slurmrestd never holds the key.
- **Its own user** (USER, systemd-sysusers): slurmrestd refuses root and SlurmUser, and needs neither: it acts as
  each request's user. The unit confines it as corral's exporter (no capabilities, read-only system).
- **Reachable by the declared clients only** (`slurm.rest.clients`: roles, whose nodes' cluster addresses, or
  networks): an nftables table of its own (NFT), loaded by the unit before slurmrestd starts (`+`: as root) and
  deleted when it stops; a start fails when the table cannot be loaded, so the port is never open unfiltered.
  Others get a TCP reset. The controller itself (loopback) always reaches it: its readiness check, admins.
- Every Slurm node loads the JWT plugin (slurm.conf's AuthAltTypes), so each gets slurm-wlm-jwt-plugin; the nodes of
  the client roles get curl.
- Two declarations (components/slurm.py): "slurm jwt" before the controller's component (the plugin, curl, the key
  slurmctld reads with slurm.conf) and "slurm rest" after it (Debian's unit starts only once slurm.conf is there).
- `slurm.rest` unset: slurmrestd stopped and disabled, its drop-ins, its table and the key removed
  (resources.Removed, Absent)."""

from __future__ import annotations

import ipaddress

from corral import secrets
from corral.render import resources as r
from corral.render.restart import CALM, Policy, dropin_path
from corral.render.slurm_exporter import HARDENING

UNIT = "slurmrestd"
USER = "corral-slurmrestd"
KEY = "/etc/slurm/jwt_hs256.key"
SECRET = "slurm-jwt-hs256.key"  # in the state dir's secrets/
DROPIN = f"/etc/systemd/system/{UNIT}.service.d/corral.conf"
NFT = "/etc/corral/slurmrestd.nft"
TABLE = "corral_slurmrestd"
SYSUSERS = f"/etc/sysusers.d/{USER}.conf"
SYSUSERS_TEXT = (f"# Managed by corral: slurmrestd's own user (no login, no home, no groups)\n"
                 f'u {USER} - "corral Slurm REST API" /nonexistent /usr/sbin/nologin\n')
SLURM_ROLES = ("controller", "compute", "login")
POLICY = Policy(**CALM, binds=True, why="the Slurm REST API (slurm.rest): requests fail while it is away")


def jwt_on(cluster, node) -> bool:
    """The JWT component's gate: every Slurm node while slurm.rest is set (the plugin), and the controllers always
    (the key removed when it is not)."""
    roles = SLURM_ROLES if cluster.spec.slurm.rest is not None else ("controller",)
    return any(role in node.roles for role in roles)


def rest_on(cluster, node) -> bool:
    """The REST component's gate: the controllers (slurmrestd there, or removed when slurm.rest is unset)."""
    return "controller" in node.roles


def slurm_conf(cluster) -> dict[str, str]:
    """slurm.conf: slurmctld accepts JWTs besides MUNGE credentials, checked with KEY."""
    if cluster.spec.slurm.rest is None:
        return {}
    return {"AuthAltTypes": "auth/jwt", "AuthAltParameters": f"jwt_key={KEY}"}


def client_addresses(cluster) -> list[str]:
    """The addresses and networks slurm.rest.clients name: a role's nodes' cluster addresses, or a network."""
    out: list[str] = []
    for client in cluster.spec.slurm.rest.clients:
        if isinstance(client, str):
            out += [n.address for n in cluster.with_role(client)]
        else:
            out.append(str(client))
    return list(dict.fromkeys(out))


def nft_rules(cluster) -> str:
    """The table that lets only the clients (and this node) reach the port; loaded atomically with `nft -f`."""
    port = cluster.spec.slurm.rest.port
    addresses = client_addresses(cluster)
    v4 = [a for a in addresses if ipaddress.ip_network(a, strict=False).version == 4]
    v6 = [a for a in addresses if ipaddress.ip_network(a, strict=False).version == 6]
    accept = [f"    tcp dport {port} ip saddr {{ {', '.join(v4)} }} accept"] if v4 else []
    accept += [f"    tcp dport {port} ip6 saddr {{ {', '.join(v6)} }} accept"] if v6 else []
    return "\n".join([
        "#!/usr/sbin/nft -f", "# Managed by corral (render/slurm_rest.py): who may reach slurmrestd (slurm.rest.clients)",
        f"table inet {TABLE}", f"delete table inet {TABLE}", f"table inet {TABLE} {{", "  chain input {",
        "    type filter hook input priority filter; policy accept;", f'    tcp dport {port} iifname "lo" accept',
        *accept, f"    tcp dport {port} reject with tcp reset", "  }", "}"]) + "\n"


def dropin(cluster, node) -> str:
    """slurmrestd as USER on the node's cluster address, JWT only, behind its table."""
    port = cluster.spec.slurm.rest.port
    listen = f"[{node.address}]:{port}" if ":" in node.address else f"{node.address}:{port}"
    return f"""# Managed by corral (render/slurm_rest.py): the Slurm REST API (slurm.rest)
[Service]
User={USER}
Group={USER}
Environment=SLURM_JWT=daemon
ExecStartPre=+/usr/sbin/nft -f {NFT}
ExecStart=
ExecStart=/usr/sbin/slurmrestd -a rest_auth/jwt {listen}
ExecStopPost=+-/usr/sbin/nft delete table inet {TABLE}
{HARDENING}
"""


def daemon(cluster) -> r.Daemon:
    """What `corral audit` expects on a controller: slurmrestd as its own user, on the port, for the clients."""
    rest = cluster.spec.slurm.rest
    who = "slurm.rest.clients: " + ", ".join(str(c) for c in rest.clients) + " (and this node)"
    return r.Daemon(f"{UNIT}.service", USER, "the Slurm REST API: acts as each request's user, by their token",
                    listens=(r.Listener(rest.port, who, on="cluster"),))


def ready(cluster, node) -> str:
    """Succeeds once slurmrestd answers HTTP on its address (any status: a request without a token is refused)."""
    port = cluster.spec.slurm.rest.port
    return (f"python3 -I -c \"import http.client as h; c = h.HTTPConnection('{node.address}', {port}, timeout=2); "
            "c.request('GET', '/openapi/v3'); c.getresponse()\"")


def jwt_resources(cluster, node) -> list:
    """Before the controller's component: the JWT plugin every Slurm program loads (slurm.conf's AuthAltTypes), curl
    where the clients are, and the key on the controllers before slurmctld reads slurm.conf's AuthAltParameters."""
    if cluster.spec.slurm.rest is None:  # a controller only (the gate)
        return [r.Absent(KEY, f"{KEY} removed (slurm.rest unset)")]
    out = [r.Packages(("slurm-wlm-jwt-plugin",), "Slurm's JWT plugin installed", "slurm.rest (AuthAltTypes)")]
    if any(role in cluster.spec.slurm.rest.clients for role in node.roles):
        out.append(r.Packages(("curl",), "curl installed (the REST API's client)", "slurm.rest.clients (curl)"))
    if "controller" in node.roles:
        key = r.Made(lambda: secrets.secret_bytes(cluster.state_dir, SECRET, 32), SECRET)
        out.append(r.File(KEY, key, f"{KEY} (the JWT key)", mode="600", user="slurm", group="slurm", secret=True,
                          disruption="none (slurmctld reads it when it starts or reconfigures)"))
    return out


def rest_resources(cluster, node) -> list:
    """After the controller's component (the unit needs /etc/slurm/slurm.conf): slurmrestd on each controller."""
    if cluster.spec.slurm.rest is None:
        return [r.Removed(UNIT, f"{UNIT} removed (slurm.rest unset)", (DROPIN, dropin_path(UNIT), NFT, SYSUSERS))]
    restart, files = f"restart {UNIT}", (SYSUSERS, NFT, DROPIN)
    return [
        r.Packages((UNIT, "nftables"), "slurmrestd and nftables installed", "slurm.rest (slurmrestd, its clients)"),
        r.File(SYSUSERS, SYSUSERS_TEXT, disruption=restart),
        r.OnChange(f"user {USER} made", "systemd-sysusers", (SYSUSERS,), (("systemd-sysusers", SYSUSERS),)),
        r.Directory("/etc/corral"),
        r.File(NFT, nft_rules(cluster), disruption=restart),
        r.File(DROPIN, dropin(cluster, node), disruption=restart),
        r.Service(UNIT, "slurmrestd running", ready(cluster, node), "slurmrestd restarted (user, clients or unit "
                  "changed)", files, policy=POLICY, runs=daemon(cluster)),
    ]
