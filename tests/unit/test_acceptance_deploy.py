"""deploy/acceptance.py without a node: which operations each node gets (prepared, no SSH), on a real and
on the virtual cluster; the build scripts (render/acceptance.py): checked before built, for the node's
architecture, against the CUDA toolkit of the spec; run against stand-in curl/make, a bad checksum or a
failed build installs nothing. The operations themselves (snapshot in, commands or a no-op out) are
tested by their cases in tests/operations/gpu_burn_build/ and nccl_tests_build/."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path


from corral.deploy import acceptance as deploy_acceptance
from corral.render.acceptance import (compute, gpu_burn_build_script, gpu_burn_mark, nccl_tests_build_script,
                                      nccl_tests_mark)
from corral.spec.loader import load_text
from corral.spec.models_acceptance import BurnSpec, NcclSpec
from tests.unit.deploy_ops import planned_ops

SUM = "a" * 64
SPEC = f"""\
name: lab
nodes:
  - {{names: ctl1, addresses: [10.213.0.10], roles: [controller]}}
  - {{names: login1, addresses: [10.213.0.20], roles: [login]}}
  - {{names: "gpu[01-02]", addresses: "10.213.0.[11-12]", roles: [compute], gpus: {{model: h100, count: 8}}}}
  - {{names: cpu01, addresses: [10.213.0.30], roles: [compute]}}
nvidia: {{cuda_toolkit: {{version: "12.4"}}}}
acceptance: {{burn: {{enabled: true, sha256: {SUM}}}, nccl: {{enabled: true, sha256: {SUM}, nccl_version: 2.21.5-1+cuda12.4}}}}
"""


def op_names(tmp_path: Path, text: str) -> dict[str, list[str]]:
    return planned_ops(tmp_path, text, (deploy_acceptance.acceptance,), labelled=False)


def test_real_cluster_builds_on_gpu_compute_nodes_only(tmp_path):
    ops = op_names(tmp_path, SPEC)
    assert ops["gpu01"] == ["acceptance build tools", "gpu-burn 671f4be92477", "NVIDIA CUDA repository",
                            "NCCL (libnccl2, libnccl-dev)", "nccl-tests 2.17.10"]
    assert ops["ctl1"] == ops["login1"] == ops["cpu01"] == []
    burn_only = op_names(tmp_path, SPEC.replace("nccl: {enabled: true", "nccl: {enabled: false"))
    assert burn_only["gpu02"] == ["acceptance build tools", "gpu-burn 671f4be92477"]
    nothing = op_names(tmp_path, SPEC.replace("enabled: true", "enabled: false"))
    assert all(v == [] for v in nothing.values())


def test_virtual_cluster_says_why_nothing_is_built(tmp_path):
    ops = op_names(tmp_path, SPEC + "virtual: {bridge: corral0, subnet: 10.213.0.0/24}\n")
    assert ops["gpu01"] == ["GPU acceptance tools"] and ops["ctl1"] == []
    cluster = load_text(SPEC + "virtual: {bridge: corral0}\n", str(tmp_path / "cluster.yaml"))
    assert deploy_acceptance.skip_reason(cluster, cluster.node("gpu01")).startswith(
        "virtual cluster: gpu-burn and nccl-tests are not built (the offline virtual nodes cannot download")


def test_build_scripts_check_before_they_build_for_the_node_architecture():
    b = BurnSpec(enabled=True, sha256="b" * 64)
    script = gpu_burn_build_script(b, "12.4", "h100")
    assert "https://github.com/wilicc/gpu-burn/archive/671f4be92477ce01cd9b536bc534a006dbee058f.tar.gz" in script
    assert script.index("sha256sum -c") < script.index("make -C") < script.index("install -m 755")
    assert "make -C \"$tmp/src\" CUDAPATH=/usr/local/cuda-12.4 COMPUTE=90 >" in script
    assert script.index("mv -f /usr/local/lib/corral/gpuburn/compare.ptx.new") < \
        script.index("mv -f /usr/local/lib/corral/gpuburn/gpu_burn.new")  # the binary last: never without its kernel
    assert gpu_burn_mark(b, "12.4", "h100") == "gpu-burn 671f4be92477ce01cd9b536bc534a006dbee058f cuda 12.4 compute 90\n"
    assert compute("a100") == "80" and compute("no-such-gpu") == "75" and compute(None) == "75"
    n = NcclSpec(enabled=True, sha256="b" * 64)
    script = nccl_tests_build_script(n, "12.4", "a100")
    assert "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.17.10.tar.gz" in script
    assert ("make -C \"$tmp/src/src\" BUILDDIR=\"$tmp/build\" \"$tmp/build/all_reduce_perf\" "
            "CUDA_HOME=/usr/local/cuda-12.4 NCCL_HOME=/usr NVCC_GENCODE=-gencode=arch=compute_80,code=sm_80 >") in script
    assert script.index("sha256sum -c") < script.index("make -C") < script.index("ldd") < script.index("install -m 755")
    assert "\"$(dpkg-query -W -f='${Version}' libnccl-dev)\"" in script
    assert nccl_tests_mark(n, "12.4", "a100", "2.21.5-1+cuda12.4") == \
        "nccl-tests 2.17.10 cuda 12.4 compute 80 nccl 2.21.5-1+cuda12.4\n"


def stand_ins(tmp_path: Path, payload: bytes, make_rc: int = 0) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    src = tmp_path / "payload"
    src.write_bytes(payload)
    log = tmp_path / "log"
    (bin_dir / "curl").write_text(f"#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
                                  f"echo \"curl $1\" >> {log}; cp {src} \"$out\"\n")
    (bin_dir / "tar").write_text(f"#!/bin/sh\necho \"tar $*\" >> {log}\n")
    (bin_dir / "make").write_text(f"#!/bin/sh\necho \"make $*\" >> {log}\necho 'nvcc fatal : Unsupported gpu "
                                  f"architecture' >&2\nexit {make_rc}\n")
    (bin_dir / "install").write_text(f"#!/bin/sh\necho \"install $*\" >> {log}\nexit 1\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")


def test_a_bad_checksum_or_a_failed_build_installs_nothing(tmp_path):
    tampered = gpu_burn_build_script(BurnSpec(enabled=True, sha256="0" * 64), "12.4", "h100")
    proc = subprocess.run(["bash", "-c", tampered], env=stand_ins(tmp_path, b"tampered"), capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 1
    assert "gpu-burn: the source does not match acceptance.burn.sha256; nothing installed" in proc.stderr
    assert not any(line.startswith(("make", "install")) for line in (tmp_path / "log").read_text().splitlines())
    good = hashlib.sha256(b"source").hexdigest()
    broken = nccl_tests_build_script(NcclSpec(enabled=True, sha256=good), "12.4", "b200")
    proc = subprocess.run(["bash", "-c", broken], env=stand_ins(tmp_path / "b", b"source", make_rc=2),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and "nccl-tests: build failed" in proc.stderr and "Unsupported gpu" in proc.stderr
    log = (tmp_path / "b" / "log").read_text()
    assert "compute_100,code=sm_100" in log and "install" not in log


def test_the_marks_the_scripts_write_are_the_marks_the_operations_compare(tmp_path):
    def written(script: str, prefix: str, env: dict | None = None) -> str:
        line = next(x for x in script.splitlines() if x.startswith(prefix))
        return subprocess.run(["bash", "-c", line.split(" > ")[0]], capture_output=True, text=True,
                              env=env, timeout=10).stdout
    b = BurnSpec(enabled=True, sha256="b" * 64)
    assert written(gpu_burn_build_script(b, "12.4", "h100"), "printf 'gpu-burn") == gpu_burn_mark(b, "12.4", "h100")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text("#!/bin/sh\nprintf '2.21.5-1+cuda12.4'\n")
    (bin_dir / "dpkg-query").chmod(0o755)
    n = NcclSpec(enabled=True, sha256="b" * 64)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert written(nccl_tests_build_script(n, "12.4", "h100"), "printf 'nccl-tests", env) == \
        nccl_tests_mark(n, "12.4", "h100", "2.21.5-1+cuda12.4")
