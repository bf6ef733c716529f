"""`acceptance:` in cluster.yaml (spec/models_acceptance.py, rules_acceptance.py): defaults, the floors
corral derives from the datasheet figures, the cross-checks (nvcc needed, a floor for a model no node
has, a sha256 for each source on a real cluster) and the warnings (measured but not judged)."""

from __future__ import annotations

import pytest

from corral.errors import SpecError
from corral.spec.loader import load_text
from corral.spec.models_acceptance import FLOOR_FRACTION, BurnSpec, burn_floor, default_floors
from corral.spec.rules import spec_warnings

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 4}}
"""
SUM = "a" * 64


def load(extra: str = "", base: str = SPEC):
    return load_text(base + extra, "cluster.yaml")


def problems(extra: str, base: str = SPEC) -> str:
    with pytest.raises(SpecError) as e:
        load(extra, base)
    return str(e.value)


def test_defaults_run_the_quick_dcgm_diagnostic_only():
    acc = load().spec.acceptance
    assert acc.dcgm_diag_level == 1 and not acc.burn.enabled and not acc.nccl.enabled
    assert acc.burn.version == "671f4be92477ce01cd9b536bc534a006dbee058f" and acc.nccl.version == "2.17.10"
    assert spec_warnings(load()) == []


def test_default_floors_are_a_fraction_of_the_datasheet_fp32_peak():
    floors = default_floors()
    assert FLOOR_FRACTION == 0.4
    assert floors["h100"] == 20.4 and floors["a100"] == 7.8 and floors["l40s"] == 36.6 and floors["t4"] == 3.2
    assert "b200" not in floors  # no datasheet figure checked in: measured, not judged
    spec = BurnSpec(floor_tflops={"h100": 45.0})
    assert burn_floor(spec, "h100") == 45.0 and burn_floor(spec, "a100") == 7.8 and burn_floor(spec, "b200") is None


def test_burn_and_nccl_need_the_cuda_toolkit():
    text = problems(f"acceptance: {{burn: {{enabled: true, sha256: {SUM}}}, nccl: {{enabled: true, sha256: {SUM}}}}}\n")
    assert "cluster.yaml:5:30: acceptance.burn is built with nvcc: it needs nvidia.cuda_toolkit" in text
    assert "acceptance.nccl is built with nvcc: it needs nvidia.cuda_toolkit" in text
    assert 'fix: add nvidia.cuda_toolkit: {version: "12.4"}' in text


def test_a_floor_for_a_model_no_node_has_is_an_error():
    text = problems("acceptance: {burn: {floor_tflops: {h100s: 40}}}\n")
    assert "a burn floor for a GPU model no compute node has (got 'h100s'); fix: name a model of the spec's " \
           "nodes: h100" in text
    assert "cluster.yaml:5:" in text
    assert load("acceptance: {burn: {floor_tflops: {h100: 40}}}\n").spec.acceptance.burn.floor_tflops == {"h100": 40.0}


def test_each_source_needs_a_sha256_on_a_real_cluster_only():
    cuda = "nvidia: {cuda_toolkit: {version: '12.4'}}\n"
    text = problems(cuda + "acceptance: {burn: {enabled: true}, nccl: {enabled: true}}\n")
    assert "no sha256 for gpu-burn source" in text and "acceptance.burn.sha256: <64 hex digits>" in text
    assert "no sha256 for nccl-tests source" in text
    skip = load(cuda + "acceptance: {burn: {enabled: true, sha256: skip}, nccl: {enabled: true, sha256: skip}}\n")
    assert "acceptance.burn.sha256: skip - gpu-burn source installed as root without a checksum" in spec_warnings(skip)
    virtual = SPEC.replace("10.0.0.", "10.213.0.") + "virtual: {bridge: corral0}\n"
    assert load(cuda + "acceptance: {burn: {enabled: true}}\n", base=virtual).spec.acceptance.burn.enabled


@pytest.mark.parametrize(("extra", "message"), [
    ("acceptance: {dcgm_diag_level: 4}\n", "acceptance.dcgm_diag_level: must be at most 3"),
    ("acceptance: {burn: {seconds: 5}}\n", "acceptance.burn.seconds: must be at least 10"),
    ("acceptance: {burn: {floor_tflops: {h100: 0}}}\n", "acceptance.burn.floor_tflops.h100: must be more than 0.0"),
    ("acceptance: {burn: {version: main}}\n", "acceptance.burn.version: does not have the expected form"),
    ("acceptance: {burn: {url: 'https://mirror/{arch}.tgz'}}\n", "the URL may use only {version}"),
    ("acceptance: {nccl: {url: 'https://mirror/x.tgz;id'}}\n", "characters a URL here may not have"),
    ("acceptance: {nccl: {nccl_version: '2.21 ; id'}}\n", "nccl_version: does not have the expected form"),
])
def test_values_are_checked(extra, message):
    assert message in problems(extra)


def test_warnings_say_what_is_measured_but_not_judged():
    base = SPEC.replace("model: h100", "model: b200")
    cluster = load("nvidia: {cuda_toolkit: {version: '12.8'}, dcgm: {enabled: false}}\n"
                   f"acceptance: {{burn: {{enabled: true, sha256: {SUM}}}, nccl: {{enabled: true, sha256: {SUM}}}}}\n",
                   base=base)
    assert spec_warnings(cluster) == [
        "acceptance.burn: no TFLOPS floor for GPU model b200: measured, not judged "
        "(set acceptance.burn.floor_tflops.b200)",
        "acceptance.nccl: no floor_busbw_gbps: the all-reduce bandwidth is measured, not judged",
        "acceptance.dcgm_diag_level: 1 but nvidia.dcgm.enabled is false: validate skips the DCGM diagnostics"]
    quiet = load("nvidia: {dcgm: {enabled: false}}\nacceptance: {dcgm_diag_level: 0}\n")
    assert spec_warnings(quiet) == []
