"""Joining Kubernetes nodes after an apply (scheduler: kubernetes; docs/components/kubernetes.md).

The apply's "join pending" changes (deploy/kubernetes.py, disruption JOIN) name the nodes without a
kubelet.conf. On the first control-plane node corral then makes one bootstrap token that lives 15 minutes,
reads the hash of the cluster CA's public key and, when a control-plane node joins, uploads the
control-plane certificates under a fresh certificate key. Each joining node's corral-kubeadm-join reads
them on stdin: they are on no command line, in no file but a private temporary copy, and never in the
journal (a step's OpResult says what was done, never the values; output is scrubbed of them).
Control-plane nodes join one at a time (etcd grows by one member at a time), then the workers in parallel.
The token (and the uploaded certificates) are deleted when the joins are done, whatever happened; a node
whose join failed was reset by its script. A joined node gets the spec's labels (render/gpu_operator.py)."""

from __future__ import annotations

import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from corral.deploy.kubernetes import ADMIN_CONF, JOIN, JOIN_SCRIPT
from corral.engine.handoff import K8S_JOIN
from corral.engine.results import OpResult, RunResult
from corral.errors import CorralError
from corral.facts.kubernetes import KUBECTL as kubectl
from corral.render.gpu_operator import node_labels
from corral.render.kubernetes import first_control_plane
from corral.spec.cluster import Cluster
from corral.workflows import node_rollout

WHAT = "kubernetes join"
TTL = "15m"
JOIN_TIMEOUT_S = 780  # the script's kubeadm join (600 s) and reset (120 s), and the SSH around them
KUBECTL = f"timeout 60 {kubectl}"
TOKEN_RE = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
HEX64 = re.compile(r"[0-9a-f]{64}")


def secrets_script(cert_key: bool) -> str:
    """Run on the first control-plane node: one labelled line per value (parse_secrets)."""
    upload = ("k=$(timeout 120 kubeadm init phase upload-certs --upload-certs --kubeconfig "
              f"{ADMIN_CONF} | tail -n 1) || exit 1\nprintf 'key %s\\n' \"$k\"\n") if cert_key else ""
    return (f"set -eu\nt=$(timeout 60 kubeadm token create --ttl {TTL} --kubeconfig {ADMIN_CONF} "
            "--description 'corral join: deleted when the joins are done')\nprintf 'token %s\\n' \"$t\"\n"
            "h=$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der "
            "| sha256sum | cut -d' ' -f1)\nprintf 'ca sha256:%s\\n' \"$h\"\n" + upload)


@dataclass(frozen=True)
class JoinSecrets:
    token: str = field(repr=False)
    ca_hash: str
    cert_key: str | None = field(default=None, repr=False)

    @property
    def token_id(self) -> str:
        """The token's public half (kubeadm token delete takes it; the secret half is after the dot)."""
        return self.token.split(".")[0]

    def stdin(self) -> str:
        return f"{self.token}\n{self.ca_hash}\n{self.cert_key or ''}\n"

    def scrub(self, text: str) -> str:
        for value in (self.token, self.cert_key):
            if value:
                text = text.replace(value, "*MASKED*")
        return text


def parse_secrets(out: str, cert_key: bool) -> JoinSecrets:
    """The values of secrets_script's output, each checked (an error never quotes the output)."""
    got = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    token, ca, key = got.get("token", "").strip(), got.get("ca", "").strip(), got.get("key", "").strip()
    if not TOKEN_RE.fullmatch(token):
        raise CorralError("kubeadm token create gave no bootstrap token", fix="run `kubeadm token create` on the "
                          "first control-plane node by hand and read its error")
    if not (ca.startswith("sha256:") and HEX64.fullmatch(ca[7:])):
        raise CorralError("the cluster CA's public-key hash could not be read from /etc/kubernetes/pki/ca.crt")
    if cert_key and not HEX64.fullmatch(key):
        raise CorralError("kubeadm init phase upload-certs gave no certificate key")
    return JoinSecrets(token, ca, key if cert_key else None)


def _op(step: str, status: str, reason: str, stderr: str = "") -> OpResult:
    return OpResult(name=f"{WHAT} | {step}", status=status, reason=reason, disruption=JOIN, stderr_tail=stderr)


def _fail(result: RunResult, node: str, op: OpResult) -> None:
    n = result.nodes[node]
    n.ops.append(op)
    n.error, n.error_kind = f"{WHAT}: {op.reason}", "op-failed"


def _tail(text: str, lines: int = 10) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def join(cluster: Cluster, result: RunResult, say=None, runner=None) -> list[str]:
    """Join every node with a pending join; the names of those that joined. `runner` is
    engine.remote.run_on (tests give a stand-in)."""
    from corral.engine import remote
    run_on = runner or remote.run_on
    say = say or (lambda text: None)
    nodes = node_rollout.pending(result, K8S_JOIN)  # in the spec's order: the result keeps it
    cp = first_control_plane(cluster).name
    if not nodes:
        return []
    if cp in result.nodes and not result.nodes[cp].ok:
        for name in nodes:
            result.nodes[name].ops.append(_op("kubeadm join", "skipped", f"the first control-plane node {cp} did "
                                              "not converge in this run: no token can be made"))
        return []
    cps = [n for n in nodes if "control-plane" in cluster.node(n).roles]
    workers = [n for n in nodes if n not in cps]
    say(f"{WHAT}: a {TTL} token from {cp} for {', '.join(nodes)}")
    try:
        proc = run_on(cluster, cp, secrets_script(bool(cps)), timeout=300)
        secrets = parse_secrets(proc.stdout, bool(cps)) if proc.returncode == 0 else None
        why = "" if secrets else f"making the join token on {cp} failed (exit {proc.returncode})"
        stderr = proc.stderr
    except CorralError as exc:  # unreachable, timed out (a token made then expires by itself), or no token read
        secrets, why, stderr = None, re.sub(TOKEN_RE, "*MASKED*", str(exc)), ""
    if secrets is None:
        tokenless = _tail(re.sub(TOKEN_RE, "*MASKED*", stderr))
        for name in nodes:
            _fail(result, name, _op("kubeadm join", "failed", why, tokenless))
        return []
    cp_ops = result.nodes[cp].ops if cp in result.nodes else []  # outside --limit: said in a warning below
    cp_ops.append(_op("join token", "changed", f"a {TTL} bootstrap token" + (" and the control-plane certificates "
                                                                              "(a fresh certificate key)" if cps else "")))
    joined: list[str] = []
    try:
        for name in cps:  # one at a time: etcd grows by one member at a time
            if _join_one(cluster, result, name, secrets, run_on, say):
                joined.append(name)
            else:
                break  # a control plane that lost a member's join is not grown further
        with ThreadPoolExecutor(max_workers=min(16, len(workers) or 1)) as pool:
            done = list(pool.map(lambda n: _join_one(cluster, result, n, secrets, run_on, say), workers))
        joined += [n for n, ok in zip(workers, done) if ok]
        for name in cps[len([n for n in joined if n in cps]) + 1:]:
            result.nodes[name].ops.append(_op("kubeadm join", "skipped", "an earlier control-plane join failed"))
    finally:
        cp_ops.append(_cleanup(cluster, cp, secrets, run_on))
        if cp not in result.nodes:
            result.warnings += [f"{WHAT}: on {cp} (outside --limit): {o.name.split(' | ')[1]}: {o.reason}"
                                for o in cp_ops]
    _label(cluster, result, cp, joined, run_on)
    return joined


def _join_one(cluster: Cluster, result: RunResult, name: str, secrets: JoinSecrets, run_on, say) -> bool:
    from corral.errors import NodeError
    try:
        proc = run_on(cluster, name, JOIN_SCRIPT, timeout=JOIN_TIMEOUT_S, input=secrets.stdin())
    except NodeError as exc:
        _fail(result, name, _op("kubeadm join", "failed", secrets.scrub(str(exc))))
        return False
    if proc.returncode != 0:
        _fail(result, name, _op("kubeadm join", "failed", f"kubeadm join failed (exit {proc.returncode}); the node "
                                "was reset (kubeadm reset -f)", secrets.scrub(_tail(proc.stderr))))
        say(f"node {name}: {WHAT} FAILED (exit {proc.returncode})")
        return False
    result.nodes[name].ops.append(_op("kubeadm join", "changed", "joined with a 15-minute token"))
    say(f"node {name}: {WHAT}: joined")
    return True


def _cleanup(cluster: Cluster, cp: str, secrets: JoinSecrets, run_on) -> OpResult:
    """The token deleted (and the uploaded certificates, which kubeadm would keep two hours)."""
    command = f"timeout 60 kubeadm token delete --kubeconfig {ADMIN_CONF} {shlex.quote(secrets.token_id)}"
    if secrets.cert_key:
        command += f" && {KUBECTL} -n kube-system delete secret kubeadm-certs --ignore-not-found"
    try:
        proc = run_on(cluster, cp, command, timeout=150)
        ok = proc.returncode == 0
    except CorralError:
        ok = False
    if ok:
        return _op("join token deleted", "changed", "the bootstrap token" + (" and the uploaded certificates"
                                                                           if secrets.cert_key else "") + " deleted")
    return _op("join token deleted", "failed", f"could not delete the join token (it expires by itself in {TTL}): "
               f"run `kubeadm token delete {secrets.token_id}` on {cp}")


def _label(cluster: Cluster, result: RunResult, cp: str, joined: list[str], run_on) -> None:
    """The spec's labels on the nodes that just joined (deploy/kubernetes_cluster.py keeps them on every run)."""
    labels = node_labels(cluster)
    for name in joined:
        if not labels.get(name):
            continue
        words = [name, *(f"{k}={v}" for k, v in sorted(labels[name].items()))]
        try:
            proc = run_on(cluster, cp, f"{KUBECTL} label node --overwrite " + " ".join(map(shlex.quote, words)),
                          timeout=90)
            why = "" if proc.returncode == 0 else f"kubectl label failed on {cp} (exit {proc.returncode})"
            stderr = _tail(proc.stderr, 3)
        except CorralError as exc:
            why, stderr = str(exc), ""
        if why:
            _fail(result, name, _op("labels", "failed", why + "; the next apply sets them", stderr))
        else:
            result.nodes[name].ops.append(_op("labels", "changed", "the spec's labels set"))
