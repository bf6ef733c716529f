"""The Kubernetes join flow (workflows/k8s_join.py, render/kubernetes.join_script): the node's join
script run for real with a stand-in kubeadm, the secrets' parsing, and the workflow's order, cleanup and
secrecy with a stand-in for SSH (no Kubernetes here: docs/components/kubernetes.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_kubernetes_render import GOLDEN  # noqa: E402

from corral.deploy.kubernetes import JOIN  # noqa: E402
from corral.engine.handoff import K8S_JOIN, Handoff  # noqa: E402
from corral.engine.results import NodeResult, OpResult, RunResult  # noqa: E402
from corral.errors import CorralError, NodeError  # noqa: E402
from corral.render.kubernetes import join_script, kubeadm_config  # noqa: E402
from corral.spec.loader import load  # noqa: E402
from corral.workflows import k8s_join  # noqa: E402

TOKEN = "abcdef.0123456789abcdef"
CA = "sha256:" + "a1" * 32
KEY = "f0" * 32
STUB = """#!/bin/sh
echo "$*" >> "$KUBEADM_LOG"
if [ "$1" = join ]; then
  cfg=$3; stat -c %a "$cfg" >> "$KUBEADM_LOG"; cp "$cfg" "$KUBEADM_LOG.config"; exit "${KUBEADM_RC:-0}"
fi
"""


@pytest.fixture(scope="module")
def ha():
    return load(str(GOLDEN / "ha" / "cluster.yaml"))


def _node_script(tmp_path: Path, cluster, node: str) -> tuple[Path, dict]:
    """The join script with /etc/kubernetes moved under tmp_path, and a stand-in kubeadm on PATH."""
    etc = tmp_path / "etc-kubernetes"
    etc.mkdir()
    (etc / "corral-kubeadm.yaml").write_text(kubeadm_config(cluster, cluster.node(node)))
    script = tmp_path / "corral-kubeadm-join"
    script.write_text(join_script().replace("/etc/kubernetes", str(etc)))
    script.chmod(0o700)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "kubeadm").write_text(STUB)
    (bin_ / "kubeadm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "KUBEADM_LOG": str(tmp_path / "kubeadm.log")}
    return script, env


def _run(script: Path, env: dict, stdin: str, rc: int = 0) -> subprocess.CompletedProcess:
    return subprocess.run([str(script)], input=stdin, text=True, capture_output=True, env={**env, "KUBEADM_RC": str(rc)},
                          timeout=30)


def test_a_worker_joins_with_the_token_in_a_private_copy_that_is_removed(tmp_path, ha):
    script, env = _node_script(tmp_path, ha, "gpu01")
    proc = _run(script, env, f"{TOKEN}\n{CA}\n\n")
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "kubeadm.log").read_text().splitlines()
    assert log[0].startswith("join --config ") and log[1] == "600"  # the copy was private (mktemp: 0600)
    assert TOKEN not in log[0]                                        # the token is on no command line
    filled = (tmp_path / "kubeadm.log.config").read_text()
    assert f"token: '{TOKEN}'" in filled and f"- '{CA}'" in filled and "@" not in filled.split("\n", 3)[3]
    assert list((tmp_path / "etc-kubernetes").glob(".corral-join.*")) == []  # removed
    assert "@JOIN_TOKEN@" in (tmp_path / "etc-kubernetes" / "corral-kubeadm.yaml").read_text()  # never written back


def test_a_control_plane_join_fills_the_certificate_key_and_needs_it(tmp_path, ha):
    script, env = _node_script(tmp_path, ha, "cp2")
    refused = _run(script, env, f"{TOKEN}\n{CA}\n\n")
    assert refused.returncode == 2 and "needs the certificate key" in refused.stderr
    assert not (tmp_path / "kubeadm.log").exists()
    assert _run(script, env, f"{TOKEN}\n{CA}\n{KEY}\n").returncode == 0
    assert f"certificateKey: '{KEY}'" in (tmp_path / "kubeadm.log.config").read_text()


@pytest.mark.parametrize("stdin", [f"x/;touch /tmp/pwned\n{CA}\n\n", f"{TOKEN}\n{CA}/e\n\n", "", f"{TOKEN}\n\n\n",
                                   f"{TOKEN}\n{CA}\n{KEY}/g;s/x/y\n"])
def test_anything_but_a_well_formed_token_hash_and_key_is_refused_before_kubeadm(tmp_path, ha, stdin):
    script, env = _node_script(tmp_path, ha, "cp2")
    proc = _run(script, env, stdin)
    assert proc.returncode == 2 and proc.stderr.startswith("corral-kubeadm-join: ")
    assert not (tmp_path / "kubeadm.log").exists()


def test_a_failed_join_is_reset_and_its_exit_status_kept(tmp_path, ha):
    script, env = _node_script(tmp_path, ha, "gpu01")
    proc = _run(script, env, f"{TOKEN}\n{CA}\n\n", rc=3)
    assert proc.returncode == 3 and "kubeadm reset -f" in proc.stderr
    assert (tmp_path / "kubeadm.log").read_text().splitlines()[2] == "reset -f"
    assert list((tmp_path / "etc-kubernetes").glob(".corral-join.*")) == []


def test_a_joined_node_is_left_alone(tmp_path, ha):
    script, env = _node_script(tmp_path, ha, "gpu01")
    (tmp_path / "etc-kubernetes" / "kubelet.conf").write_text("x")
    proc = _run(script, env, "")
    assert proc.returncode == 0 and "already joined" in proc.stdout and not (tmp_path / "kubeadm.log").exists()


def test_secrets_are_parsed_and_checked_without_quoting_the_output():
    out = f"token {TOKEN}\nca {CA}\nkey {KEY}\n"
    s = k8s_join.parse_secrets(out, cert_key=True)
    assert (s.token, s.ca_hash, s.cert_key, s.token_id) == (TOKEN, CA, KEY, "abcdef")
    assert TOKEN not in repr(s) and KEY not in repr(s)
    assert k8s_join.parse_secrets(out, cert_key=False).cert_key is None
    for bad in (out.replace(TOKEN, "abc"), out.replace(CA, "sha256:zz"), out.replace(KEY, "")):
        with pytest.raises(CorralError) as exc:
            k8s_join.parse_secrets(bad, cert_key=True)
        assert TOKEN not in str(exc.value) and KEY not in str(exc.value)


class Nodes:
    """A stand-in for engine.remote.run_on: what each node was asked, with what on stdin."""

    def __init__(self, fail: dict[str, int] | None = None, secrets_rc: int = 0) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.fail, self.secrets_rc = fail or {}, secrets_rc

    def __call__(self, cluster, node, command, *, timeout, input=None, check=False):
        self.calls.append((node, command, input))
        if "kubeadm token create" in command:
            return SimpleNamespace(returncode=self.secrets_rc, stdout=f"token {TOKEN}\nca {CA}\nkey {KEY}\n",
                                   stderr=f"error near {TOKEN}" if self.secrets_rc else "")
        rc = self.fail.get(node, 0) if command == k8s_join.JOIN_SCRIPT else 0
        return SimpleNamespace(returncode=rc, stdout="", stderr=f"join failed, token {TOKEN}" if rc else "")


def _applied(cluster, pending: list[str], failed: tuple = ()) -> RunResult:
    result = RunResult(run_id="r1", command="apply", mode="apply", spec_hash="x", started="2026-12-05T00:00:00Z")
    for n in cluster.nodes:
        node = result.nodes[n.name] = NodeResult(node=n.name, address=n.address)
        if n.name in pending:
            node.ops.append(OpResult(name="kubernetes node | join pending", status="changed", disruption=JOIN,
                                     rollout=Handoff(K8S_JOIN)))
        if n.name in failed:
            node.error = "kubeadm init failed"
    return result


def test_control_planes_join_one_at_a_time_then_workers_and_the_token_goes(ha):
    result, nodes = _applied(ha, ["cp2", "cp3", "gpu01", "gpu02"]), Nodes()
    joined = k8s_join.join(ha, result, runner=nodes)
    assert sorted(joined) == ["cp2", "cp3", "gpu01", "gpu02"]
    order = [(n, "secrets" if "token create" in c else "join" if c == k8s_join.JOIN_SCRIPT else
              "delete" if "token delete" in c else "label") for n, c, _ in nodes.calls]
    assert order[:3] == [("cp1", "secrets"), ("cp2", "join"), ("cp3", "join")]
    assert sorted(order[3:5]) == [("gpu01", "join"), ("gpu02", "join")]
    assert order[5] == ("cp1", "delete") and "kubeadm token delete" in nodes.calls[5][1]
    assert "abcdef" in nodes.calls[5][1] and "kubeadm-certs" in nodes.calls[5][1]  # the uploaded certificates too
    assert {n for n, what in order[6:]} == {"cp1"} and len(order[6:]) == 2  # the workers' labels, from cp1
    assert all(i == f"{TOKEN}\n{CA}\n{KEY}\n" for n, c, i in nodes.calls if c == k8s_join.JOIN_SCRIPT)
    assert not any(TOKEN in c or KEY in c for _, c, _ in nodes.calls)  # on no command line
    assert TOKEN not in json.dumps(result.to_json()) and "0123456789abcdef" not in json.dumps(result.to_json())
    assert result.ok and [o.name for o in result.nodes["cp1"].ops] == [
        "kubernetes join | join token", "kubernetes join | join token deleted"]


def test_a_failed_worker_join_fails_that_node_only_and_the_token_is_still_deleted(ha):
    result, nodes = _applied(ha, ["gpu01", "gpu02"]), Nodes(fail={"gpu01": 1})
    assert k8s_join.join(ha, result, runner=nodes) == ["gpu02"]
    assert not result.nodes["gpu01"].ok and result.nodes["gpu02"].ok
    op = result.nodes["gpu01"].ops[-1]
    assert op.status == "failed" and "reset" in op.reason and TOKEN not in op.stderr_tail and "*MASKED*" in op.stderr_tail
    assert any("token delete" in c for _, c, _ in nodes.calls)
    # the certificates were never uploaded: only workers joined
    assert not any("upload-certs" in c for _, c, _ in nodes.calls)


def test_a_failed_control_plane_join_stops_the_other_control_plane_joins(ha):
    result, nodes = _applied(ha, ["cp2", "cp3", "gpu01"]), Nodes(fail={"cp2": 1})
    assert k8s_join.join(ha, result, runner=nodes) == ["gpu01"]
    assert result.nodes["cp3"].ops[-1].status == "skipped" and not any(n == "cp3" for n, *_ in nodes.calls)


def test_no_token_no_join_and_the_error_hides_the_token(ha):
    result = _applied(ha, ["gpu01"])
    assert k8s_join.join(ha, result, runner=Nodes(secrets_rc=1)) == []
    op = result.nodes["gpu01"].ops[-1]
    assert op.status == "failed" and "making the join token on cp1 failed" in op.reason and TOKEN not in op.stderr_tail
    result = _applied(ha, ["gpu01"], failed=("cp1",))
    nodes = Nodes()
    assert k8s_join.join(ha, result, runner=nodes) == [] and nodes.calls == []
    assert result.nodes["gpu01"].ops[-1].status == "skipped"


def test_nothing_pending_asks_no_node(ha):
    nodes = Nodes()
    assert k8s_join.join(ha, _applied(ha, []), runner=nodes) == [] and nodes.calls == []


def test_a_limited_run_without_the_control_plane_still_says_what_happened_there(ha):
    result = _applied(ha, ["gpu01"])
    del result.nodes["cp1"]  # apply --limit gpu01
    assert k8s_join.join(ha, result, runner=Nodes()) == ["gpu01"]
    assert [w.split(": ")[1] for w in result.warnings] == ["on cp1 (outside --limit)"] * 2
    assert "join token deleted" in result.warnings[1]


def test_an_unreachable_control_plane_fails_the_joins_and_says_why(ha):
    def down(cluster, node, command, *, timeout, input=None):
        raise NodeError("command timed out after 300 s", node=node, command="(the secrets script)")
    result = _applied(ha, ["gpu01", "gpu02"])
    assert k8s_join.join(ha, result, runner=down) == []
    for name in ("gpu01", "gpu02"):
        assert not result.nodes[name].ok and "timed out after 300 s" in result.nodes[name].ops[-1].reason
