"""Golden ops (issue 48's safety net for "components as data"): every deploy of a spec prepared for every
node offline and planned as `corral plan` plans a fresh node, written as text, one file per node:
tests/golden/ops/<spec>/<node>.txt, compared byte for byte by tests/unit/test_golden_ops.py. Regenerate
after an intended change, then read the diff: `CORRAL_GOLDEN_UPDATE=1 .venv/bin/python -m pytest
tests/unit/test_golden_ops.py` (CORRAL_UPDATE_GOLDEN=1, the render goldens' switch, does it too).

Per node, its ops in the order the node runs them, one block each: the op's name as plan and the journal
give it ("deploy | op"), `if:` when its `_if=` does not hold (or is decided at apply time), its disruption and
rollout hand-off, then its commands (`$ ` a shell command, `> ` its further lines; `upload DEST sha256:...
(N bytes)`: the hash of the content, never the content) and the reasons it gave for doing nothing (`- `).
An op that raises a CorralError (plan and apply would fail the node there) says so; the later ops follow.

Offline: pyinfra's State over the spec's inventory, no SSH (as test_render_slurm_files.deploy_files), the
run's context filled as the engine's gather hook would (every node reachable, the Slurm version it picks,
the hardware facts the spec's entry gives); every fact a deploy or an operation asks is answered by
`fresh_fact` as a new Debian node would (sshd running, nothing else installed, no file of corral's, the
stock /etc/hosts and PAM files, on a virtual node the emulated NAS mounted). A fact it does not know fails.

Deterministic: the spec and its admin files (ADMIN_FILES) go to a temporary directory; corral's secrets are
there before the run (`seed_secrets`, each made from its name); what corral makes there itself (the cluster
CA and what it signs, the users' password hashes: random, and dated) and the secrets are replaced, in
commands and before an upload is hashed, by a placeholder naming the file, `<state:secrets/munge.key>`, in
each form corral writes it (as is, hex, its sha256, one word of it: `~hex`, `~sha256`, `~word2`); the
temporary directory by `<dir>`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyinfra.api import Config, FileUploadCommand, FunctionCommand, State, StringCommand
from pyinfra.api.host import Host

from corral.deploy import components
from corral.deploy.context import DEFAULT_VERSION
from corral.deploy.nodestate import Snapshot
from corral.engine import notes, pyinfra_seam as seam, run_context
from corral.engine.execute import _plan_if
from corral.engine.inventory import build_inventory
from corral.errors import CorralError
from corral.facts.records import NodeHW
from corral.facts.storage import DirOwner, PathState
from corral.render.slurm import slurm_version_tuple
from corral.spec.loader import load
from corral.spec.releases import release, slurm_tuple
from corral.virtual.defaults import default_spec

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = TESTS / "golden" / "ops"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMSXy+IKfJbqAmbJkf7ll8wgnvkLQm81CplM7d4miOLT alice@laptop"
PAM = TESTS / "fixtures" / "pam"
# the files a fresh Debian node has that corral's operations read and edit (everything else: absent)
STOCK = {"/etc/pam.d/sshd": (PAM / "debian12-sshd").read_text(),
         "/etc/pam.d/common-session": (PAM / "debian12-common-session").read_text(),
         "/etc/hosts": "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n"}
# the admin's files the specs name (relative to cluster.yaml), with fixed contents; (text, mode)
ADMIN_FILES = {"keys/id_ed25519": ("not a key: nothing connects\n", 0o600),
               "ldap-ca.pem": ((TESTS / "fixtures" / "ldap" / "ca.pem").read_text(), 0o644),
               "ldap-bind": ("Bind-Pw-7qZ2xK\n", 0o600), "bmc.cred": ("admin:Bmc-Pw-4kQ9zL\n", 0o600),
               "ngc.cred": ("$oauthtoken:nvapi-Up-Pw-91xQ\n", 0o600)}

# corral.secrets' files, by name (deploy/munge.py, accounting.py, grafana.py, jupyterhub.py, registry_auth.py)
SEEDED = ("munge.key", "slurmdbd-db-password", "grafana-admin-password", "jupyterhub-cookie", "jupyterhub-proxy-token",
          "jupyterhub-validate-token", "registry-loader")


@dataclass(frozen=True)
class Spec:
    """A golden spec: its cluster.yaml text, and the hardware facts a run would have read (node -> NodeHW)."""
    text: Callable[[], str]
    hw: dict[str, NodeHW] = field(default_factory=dict)


SPECS = {
    # what `corral up` writes (workflows/up.py start_virtual): login node, shared /home, alice
    "virtual": Spec(lambda: default_spec(user_key=KEY)),
    # a real cluster with many features on: the file says which
    "features": Spec(lambda: (GOLDEN / "features" / "cluster.yaml").read_text(),
                     hw={n: NodeHW(64, 2, 16, 2, 512000) for n in ("gpu1", "mig1")}),
    # three control-plane nodes behind kube-vip, the Operator's driver, MIG (the render test's golden spec)
    "kubernetes-ha": Spec(lambda: (TESTS / "golden" / "kubernetes" / "ha" / "cluster.yaml").read_text()),
}


def fresh_fact(host, fact, kwargs: dict):
    """What a new node answers to `fact` (a pyinfra FactBase class) asked with `kwargs`."""
    name, node = fact.__name__, host.data.corral_node
    virtual = host.data.corral_cluster.spec.virtual is not None
    if name == "NodeState":  # sshd running (corral reaches it), nothing else of corral's; apt lists never refreshed
        return Snapshot(packages={"openssh-server": "1:9.2p1-2"}, services={"ssh": ("active", "enabled")},
                        container="systemd-nspawn" if virtual else "none",
                        local_routes={str(node.address): False} if node.address else {})
    if name == "FileContents":
        text = STOCK.get(kwargs["path"])
        return text.splitlines() if text is not None else None
    if name == "MountPoint":  # `corral virtual` bind-mounts the emulated NAS before the run
        return PathState("mount", "ext4", "/nas") if virtual else PathState("missing")
    if name == "OwnedDir":
        return DirOwner("missing")
    if name == "LinuxDistribution":
        rel = release(node.os)
        return {"name": rel.distro.capitalize(), "major": int(rel.version.split(".")[0]),
                "release_meta": {"ID": rel.distro, "VERSION_ID": rel.version}}
    if name == "Arch":
        return "x86_64"
    if name in {"LocalAccounts", "AccountsByKey", "ManagedUsers", "HomeDirs", "SlurmAccount", "CorralMountUnits",
                "KubeCluster", "AptUpgrades", "AptHolds", "AccountingState", "ShadowDigest", "SlurmDbState",
                "PciDevices"}:  # corral's own facts: what each makes of no output (nothing there)
        return fact().process([])
    raise AssertionError(f"golden ops: no fresh-node answer for fact {name}({kwargs}): add one to fresh_fact")


def write_spec(name: str, directory: Path) -> Path:
    """The spec's cluster.yaml and the admin's files it names, in `directory`."""
    for rel, (text, mode) in ADMIN_FILES.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, mode)
    (directory / ".corral" / "ssh").mkdir(parents=True, exist_ok=True)
    shutil.copy(directory / "keys" / "id_ed25519", directory / ".corral" / "ssh" / "id_ed25519")
    spec = directory / "cluster.yaml"
    spec.write_text(SPECS[name].text())
    return spec


def seed_secrets(cluster) -> None:
    """The secrets corral makes in the state dir, there already (as an earlier apply leaves them), each from
    its name: what corral derives from one (the accounting database's password hash) is the same each time.
    A secret missing here is made at random: test_golden_ops then says the two preparations differ."""
    d = Path(cluster.state_dir) / "secrets"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in (*SEEDED, *(f"password-{u.name}" for u in cluster.spec.users if u.password)):
        (d / name).write_text(hashlib.sha256(name.encode()).hexdigest() + "\n")
        os.chmod(d / name, 0o600)


def golden_texts(name: str, directory: Path, monkeypatch) -> dict[str, str]:
    """{node: its golden text} for spec `name`, prepared in `directory` (empty; a temporary one)."""
    cluster = load(write_spec(name, directory))
    seed_secrets(cluster)
    ops = prepared_ops(cluster, SPECS[name].hw, monkeypatch)
    clean = Placeholders(directory, Path(cluster.state_dir))
    return {node: node_text(name, node, blocks, clean) for node, blocks in ops.items()}


def prepared_ops(cluster, hw: dict, monkeypatch, ctx: run_context.RunContext | None = None) -> dict[str, list[tuple]]:
    """{node: [(name, condition, note, commands, no-op reasons)]}: every declared component prepared
    (add_deploy per node, as the runner's _prepare) and each op's commands generated in the node's order,
    its `_if=` evaluated as plan does (execute._plan_if, on what earlier ops will change). The note holds what
    the run's record keeps of the op (engine/notes.py: its files, ...). `ctx`: the run's context to use (a test
    reads what it gathered, e.g. `installs`), a fresh one by default."""
    noops: dict[tuple[str, str], list[str]] = {}
    monkeypatch.setattr(Host, "get_fact", lambda self, fact, *args, **kwargs: fresh_fact(self, fact, kwargs))
    monkeypatch.setattr(Host, "noop", lambda self, text: noops.setdefault((self.name, self.current_op_hash), [])
                        .append(text))
    seam.answer_lookups_once()
    inventory = build_inventory(cluster)
    seam.quick_host_data(inventory)
    state = State(inventory, Config(), check_for_changes=False)
    out: dict[str, list[tuple]] = {}
    with run_context.active(ctx or run_context.RunContext(mode="plan")) as ctx:
        controllers = cluster.with_role("controller")  # what deploy/context.gather picks
        pinned = cluster.spec.slurm.version if cluster.spec.slurm else None
        ctx.slurm_version = (slurm_version_tuple(pinned) if pinned else
                             slurm_tuple(controllers[0].os) if controllers else DEFAULT_VERSION)
        ctx.hw, ctx.in_run = dict(hw), {n.name for n in cluster.nodes}
        deploys = components(cluster)
        with seam.as_state(state):
            for host in inventory:
                names = []
                for deploy in deploys:
                    before = len(seam.op_hashes(host))
                    seam.add_deploy(state, deploy, host=host)
                    names += [(deploy.deploy_name, h) for h in seam.op_hashes(host)[before:]]
                with seam.on_host(host):
                    out[host.name] = [_plan_op(state, host, deploy, h, noops) for deploy, h in names]
    return out


def _plan_op(state, host, deploy: str, op_hash: str, noops: dict) -> tuple:
    data = seam.op_data(state, host, op_hash)
    name = f"{deploy} | {data.global_arguments.get('name') or op_hash}"
    cond = _plan_if(data.global_arguments.get("_if"))
    commands, error = [], None
    try:
        commands = [] if cond is False else list(data.command_generator())
    except CorralError as exc:  # plan and apply fail the node here; its later ops are still written
        error = f"{type(exc).__name__}: {exc}"
    seam.set_planned_change(data.operation_meta, bool(commands))
    reasons = noops.pop((host.name, op_hash), []) + ([f"ERROR (the node fails here) {error}"] if error else [])
    return name, cond, notes.take(host.name, op_hash), commands, reasons


class Placeholders:
    """Replaces what differs from one preparation to the next (see the module's docstring)."""

    def __init__(self, directory: Path, state_dir: Path) -> None:
        forms: dict[bytes, str] = {}
        for path in sorted(p for p in (state_dir / "secrets").rglob("*") if p.is_file()):
            label, data = f"<state:{path.relative_to(state_dir)}", path.read_bytes()
            for i, word in enumerate(data.split(), 1):
                if len(word) >= 16:
                    forms[word] = f"{label}~word{i}>"
            forms[data.strip()], forms[data.hex().encode()] = f"{label}>", f"{label}~hex>"
            forms[hashlib.sha256(data.strip()).hexdigest().encode()] = f"{label}~sha256>"
            forms[data] = f"{label}>"
        self.forms = sorted(((k, v.encode()) for k, v in forms.items() if k), key=lambda kv: -len(kv[0]))
        self.dirs = sorted({str(directory).encode(), str(directory.resolve()).encode()}, key=len, reverse=True)

    def __call__(self, data: bytes) -> bytes:
        for value, label in self.forms:
            data = data.replace(value, label)
        for d in self.dirs:
            data = data.replace(d, b"<dir>")
        return data


def _command(command, clean: Placeholders) -> list[str]:
    if isinstance(command, FileUploadCommand):
        staged = f" via {command.remote_temp_filename}" if command.remote_temp_filename else ""
        src = command.src
        if isinstance(src, (str, os.PathLike)):  # a file on the control host, made at apply: named, not read
            return [f"upload {command.dest}{staged} from the control host's {clean(str(src).encode()).decode()}"]
        data = src.getvalue()
        data = clean(data.encode() if isinstance(data, str) else data)
        return [f"upload {command.dest}{staged} sha256:{hashlib.sha256(data).hexdigest()} ({len(data)} bytes)"]
    if isinstance(command, FunctionCommand):  # run on the control host at apply: by its name (no address)
        return [f"(control host) {command.function.__module__}.{command.function.__qualname__}"]
    text = command.get_raw_value() if isinstance(command, StringCommand) else str(command)
    first, *rest = clean(text.encode()).decode().split("\n")
    return [f"$ {first}", *(f"> {line}" for line in rest)]


def node_text(spec: str, node: str, blocks: list[tuple], clean: Placeholders) -> str:
    """One node's golden text: a header, then one block per op (blank line between)."""
    out = [f"# golden ops: spec {spec}, node {node}, a fresh node planned (tests/unit/golden_ops.py)",
           "# update: CORRAL_GOLDEN_UPDATE=1 .venv/bin/python -m pytest tests/unit/test_golden_ops.py"]
    for name, cond, note, commands, reasons in blocks:
        attrs = []
        if cond is not True:
            attrs.append("if: false (the ops it depends on will not change)" if cond is False
                         else "if: decided at apply time")
        if note.get("disruption") is not None and commands:
            attrs.append(f"disruption: {note['disruption']}")
        if (handoff := note.get("rollout")) is not None:
            versions = f" {handoff.old or '-'} -> {handoff.new or '-'}" if handoff.old or handoff.new else ""
            attrs.append(f"rollout: {handoff.kind}{versions}")
        attrs += [line for c in commands for line in _command(c, clean)]
        attrs += ["- " + line for reason in reasons for line in clean(reason.encode()).decode().split("\n")]
        out += ["", f"== {name}", *("  " + line for line in attrs)]
    return "\n".join(out) + "\n"
