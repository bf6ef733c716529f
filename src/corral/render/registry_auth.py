"""Who may push to the site registry, rendered (pure): corral's token server (node/registry_auth.py) on the
registry node, distribution's `auth: token` pointing at it, and podman's credential helper on the nodes
(docs/components/images.md; security review 3, N5).

Every cluster user pulls without credentials. Pushes need a token: the members of `images.registry.push_group`
get one with a MUNGE credential that `docker-credential-corral` makes as them (registries.conf names it after
containers-auth.json, so a user's own `podman login` elsewhere still works); corral's loader, from the control
host, with its secret (0600 in the state dir; only its sha256 on the node). The loader's repositories (the
bundle's images) are the token server's to guard: no user token pushes into them. No token allows a delete.
Used by deploy/registry.py, render/podman.py, render/registry.py and components/daemons.py.
"""

from __future__ import annotations

import json

from corral import paths
from corral.spec.cluster import Cluster

USER = "corral-registry-auth"
UNIT = USER
ETC = f"{paths.ETC}/registry-auth"
CONFIG, CERT, KEY = f"{ETC}/config.json", f"{ETC}/tls.crt", f"{ETC}/tls.key"
SIGNING_CERT, SIGNING_KEY = f"{ETC}/signer.crt", f"{ETC}/signer.key"
STATE = f"/var/lib/{USER}"
PROTECTED = f"{STATE}/loader-repositories"  # what corral's loader wrote: no user pushes there
PROGRAM = f"{paths.LIB}/registry_auth.py"
UNIT_PATH = f"/etc/systemd/system/{UNIT}.service"
SYSUSERS = f"/etc/sysusers.d/{USER}.conf"
SYSUSERS_TEXT = (f"# Managed by corral: the site registry's token server (no login)\n"
                 f'u {USER} - "corral registry tokens" {STATE} /usr/sbin/nologin\n')
PACKAGES = ("python3-cryptography", "munge")  # python3 comes with it (a base image has it: a bundle does not carry it)
ROOT_BUNDLE = "/etc/docker/registry/tls/token-signer.crt"  # distribution trusts tokens this certificate signed
SERVICE, ISSUER = "corral-registry", "corral-registry-auth"
TOKEN_TTL_S = 3600
LOADER = "corral-loader"
LOADER_SECRET = "registry-loader"  # secrets.secret_text's name in the state dir
HELPER_NAME = "corral"  # registries.conf credential-helpers: docker-credential-corral, in PATH
HELPER = f"/usr/local/bin/docker-credential-{HELPER_NAME}"


def enabled(cluster: Cluster) -> bool:
    r = cluster.spec.images.registry
    return r is not None and r.site


def realm(cluster: Cluster) -> str:
    r = cluster.spec.images.registry
    return f"https://{r.node}:{r.auth_port}/token"


def munge_payload(cluster: Cluster) -> str:
    """What a credential for this registry carries: one minted for anything else is refused."""
    r = cluster.spec.images.registry
    return f"corral-registry {r.node}:{r.port}"


def distribution_auth(cluster: Cluster) -> list[str]:
    """The site registry's `auth:` block (config.yml lines; strings as JSON)."""
    j = json.dumps
    return ["auth:", "  token:", f"    realm: {j(realm(cluster))}", f"    service: {j(SERVICE)}",
            f"    issuer: {j(ISSUER)}", f"    rootcertbundle: {j(ROOT_BUNDLE)}"]


def config(cluster: Cluster, loader_sha256: str) -> str:
    """The token server's configuration (0440 root:USER): of the loader's secret, only its sha256."""
    from corral.render.registry import registry_node
    r = cluster.spec.images.registry
    return json.dumps({
        "address": registry_node(cluster).address, "port": r.auth_port, "service": SERVICE, "issuer": ISSUER,
        "cert": CERT, "key": KEY, "signing_cert": SIGNING_CERT, "signing_key": SIGNING_KEY,
        "loader_sha256": loader_sha256, "push_group": r.push_group,
        "munge_payload": munge_payload(cluster), "protected_file": PROTECTED, "token_ttl": TOKEN_TTL_S,
    }, indent=1, sort_keys=True) + "\n"


def unit() -> str:
    from corral.render.restart import service_lines, unit_lines
    start, restart = "\n".join(unit_lines(UNIT)), "\n".join(service_lines(UNIT))
    return (f"# Managed by corral (images.registry in cluster.yaml)\n[Unit]\n"
            f"Description=corral's token server for the site registry (who may push)\n{start}\n"
            f"After=munge.service\n\n[Service]\nUser={USER}\nGroup={USER}\n{restart}\n"
            f"ExecStart=/usr/bin/python3 -I {PROGRAM} {CONFIG}\nNoNewPrivileges=yes\nProtectSystem=strict\n"
            f"ProtectHome=yes\nPrivateTmp=yes\nPrivateDevices=yes\nReadWritePaths={STATE}\nTasksMax=128\n"
            f"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n\n[Install]\nWantedBy=multi-user.target\n")


def helper(cluster: Cluster) -> str:
    """podman's credential helper on the nodes (run as the user): for the site registry, a MUNGE credential of
    hers; for any other registry, none (containers-auth.json answers those)."""
    r = cluster.spec.images.registry
    ours = [f"{r.node}:{r.port}", f"https://{r.node}:{r.port}"]
    return f'''#!/usr/bin/python3 -I
# Managed by corral: podman's credential helper for the site registry (a MUNGE credential of the caller's)
import json, subprocess, sys
OURS, PAYLOAD = {json.dumps(ours)}, {json.dumps(munge_payload(cluster))}
if sys.argv[1:] == ["list"]:
    print("{{}}")
    sys.exit(0)
if sys.argv[1:] != ["get"] or sys.stdin.readline(1024).strip().rstrip("/") not in OURS:
    print("credentials not found in native keychain")
    sys.exit(1)
try:
    cred = subprocess.run(["/usr/bin/munge", "-s", PAYLOAD], capture_output=True, timeout=10, check=True).stdout
except (OSError, subprocess.SubprocessError):
    print("credentials not found in native keychain")
    sys.exit(1)
print(json.dumps({{"ServerURL": OURS[0], "Username": "munge", "Secret": cred.decode().strip()}}))
'''


def registries_conf_lines(cluster: Cluster) -> list[str]:
    """registries.conf's top-level key (before any table): the users' own logins first, then corral's helper."""
    if not enabled(cluster) or cluster.spec.images.registry.push_group is None:
        return []
    return [f"credential-helpers = {json.dumps(['containers-auth.json', HELPER_NAME])}"]
