"""fabric.env and the derived job environment under hostile input: every user's job gets these
variables (corral's TaskProlog exports them), so none may make a library load code from a path, and
a value from a node's facts that is not one plain word never reaches the file."""

from __future__ import annotations

import re

import pytest

from corral.errors import CorralError
from corral.render.job_env import job_env, job_env_text
from corral.spec.loader import load_text
from corral.spec.models_topology import ENV_PREFIXES
from test_job_env import SPEC, hw

LOADING = ["CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
           "NCCL_PROFILER_PLUGIN", "NVSHMEM_BOOTSTRAP_PLUGIN", "OMPI_MCA_MCA_BASE_COMPONENT_PATH", "UCX_MODULE_DIR",
           "FI_PROVIDER_PATH", "HCOLL_PLUGIN_DIR", "PMIX_MCA_MCA_BASE_COMPONENT_PATH", "NCCL_LIB_PATH",
           "CUDA_LIBRARY_PATH", "UCX_PRELOAD", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH"]


@pytest.mark.parametrize("key", LOADING)
def test_a_code_loading_variable_is_refused_with_its_place(key):
    with pytest.raises(CorralError) as err:
        load_text(SPEC + f"fabric: {{env: {{{key}: /tmp/x.so}}}}\n", "cluster.yaml")
    assert re.search(rf"cluster.yaml:5:\d+: fabric.env: '{key}' ", str(err.value)), str(err.value)


@pytest.mark.parametrize("key", ["NCCL_DEBUG", "NCCL_TOPO_FILE", "UCX_TLS", "FI_PROVIDER", "NCCL_IB_HCA",
                                 "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO", "UCX_MODULES"])
def test_the_tuning_variables_stay_allowed(key):
    assert load_text(SPEC + f"fabric: {{env: {{{key}: x}}}}\n", "c.yaml").spec.fabric.env == {key: "x"}


@pytest.mark.parametrize("prefix", ENV_PREFIXES)
@pytest.mark.parametrize("suffix", ["_PLUGIN", "_X_PLUGIN_DIR", "_INJECTION64_PATH", "_SEARCH_PATH", "_PLUGIN_PATH"])
def test_every_prefix_with_a_code_loading_suffix_is_refused(prefix, suffix):
    with pytest.raises(CorralError, match="makes a library load code"):
        load_text(SPEC + f"fabric: {{env: {{{prefix}{suffix}: /opt/x}}}}\n", "c.yaml")


@pytest.mark.parametrize("iface", ["ib0\nLD_PRELOAD=/tmp/x.so", "eth$(touch /tmp/p)", "en p1", "ib0;id", "`id`",
                                   "ib0\"", "x'y"])
def test_a_derived_value_that_is_not_one_word_never_reaches_the_file(iface):
    cluster = load_text(SPEC, "c.yaml")
    facts = hw(rdma=(f"{iface}:1:ACTIVE:InfiniBand:400",), addrs=("lo 127.0.0.1", f"{iface} 10.0.0.11"))
    env = job_env(cluster, cluster.node("gpu01"), facts)
    assert env == {}, env
    text = job_env_text(cluster, cluster.node("gpu01"), facts)
    assert "LD_PRELOAD" not in text and "$(" not in text and "`" not in text and len(text.splitlines()) == 1
