"""`reports:` in cluster.yaml (spec/models_reports.py, rules_reports.py): defaults, prices for the GPU
models and MIG profiles of the spec's nodes only (located errors otherwise), the currency a short code."""

from __future__ import annotations

import pytest

from corral.errors import SpecError
from corral.spec.loader import load_text

SPEC = """\
name: lab
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
  - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 4}}
  - names: gpu03
    addresses: [10.0.0.13]
    roles: [compute]
    gpus: {model: a100, count: 2, mig: [{gpus: "0", profiles: [3g.40gb, 3g.40gb]}]}
nvidia: {mig_parted: {sha256: skip}}
"""


def load(extra: str = ""):
    return load_text(SPEC + extra, "cluster.yaml")


def problems(extra: str) -> str:
    with pytest.raises(SpecError) as e:
        load(extra)
    return str(e.value)


def test_defaults_no_prices_in_usd_no_carbon_intensity():
    reports = load().spec.reports
    assert reports.gpu_hour_cost == {} and reports.currency == "USD" and reports.co2_g_per_kwh is None
    assert load("reports: {co2_g_per_kwh: 350}\n").spec.reports.co2_g_per_kwh == 350.0


def test_prices_for_the_models_and_mig_profiles_of_the_nodes():
    reports = load("reports: {gpu_hour_cost: {h100: 2.5, a100: 1, 3g.40gb: 0.4}, currency: SU}\n").spec.reports
    assert reports.gpu_hour_cost == {"h100": 2.5, "a100": 1.0, "3g.40gb": 0.4} and reports.currency == "SU"


def test_a_price_for_a_gpu_type_no_node_has_is_a_located_error():
    text = problems("reports:\n  gpu_hour_cost:\n    h100: 2.5\n    h100s: 3\n")
    assert text == ("cluster.yaml:13:12: a GPU-hour price for a GPU type no node of the spec has (got 'h100s'); "
                    "fix: name a GPU model (or MIG profile) of the spec's nodes: 3g.40gb, a100, h100")


@pytest.mark.parametrize("extra, words", [
    ("reports: {gpu_hour_cost: {h100: -1}}\n", "reports.gpu_hour_cost.h100: must be at least 0.0 (got -1)"),
    ("reports: {gpu_hour_cost: {H100: 1}}\n", "cluster.yaml:10:"),
    ("reports: {gpu_hour_cost: {'h100;id': 1}}\n", "cluster.yaml:10:"),
    ("reports: {currency: 'US$'}\n", "cluster.yaml:10:"),
    ("reports: {currency: ''}\n", "cluster.yaml:10:"),
    ("reports: {co2_g_per_kwh: -5}\n", "cluster.yaml:10:26: reports.co2_g_per_kwh: must be at least 0.0 (got -5)"),
    ("reports: {co2_g_per_kwh: 20000}\n", "reports.co2_g_per_kwh: must be at most 5000.0 (got 20000)"),
    ("reports: {co2_g_per_kwh: low}\n", "reports.co2_g_per_kwh: must be a number (got 'low')"),
    ("reports: {currency: EUR, cost: 1}\n", "unknown key 'reports.cost'; fix: valid keys here: co2_g_per_kwh, currency, gpu_hour_cost"),
])
def test_bad_values_are_located_errors(extra, words):
    assert words in problems(extra)
