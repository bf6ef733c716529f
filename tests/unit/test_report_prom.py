"""`corral report usage`'s Prometheus query and answers: the PromQL (reports/promql.py) evaluated by the
real promtool on series shaped like dcgm-exporter's, the curl command (reports/prom_query.py), the parser
(reports/prom_api.py) on the answers of tests/fixtures/prometheus/ (README there)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from corral.reports.prom_api import JobUse, NotUnderstood, Refused, figures
from corral.reports.prom_query import prom_command
from corral.reports.promql import FIGURES, step_s, usage_query
from tests.unit.promql_eval import DCGM_SERIES as SERIES, promtool_test

PROM = Path(__file__).resolve().parent.parent / "fixtures" / "prometheus"


def read(name: str) -> str:
    return (PROM / name).read_text()


@pytest.mark.parametrize("window_s, scrape_s, expected", [
    (3600, 15, 15),                 # an hour: every scrape
    (7 * 86400, 15, 61),            # a week: 604800 / 10000, rounded up
    (30 * 86400, 15, 260),
    (3600, 120, 120),               # never finer than the scrape interval
])
def test_the_subquery_step_bounds_the_points_per_series(window_s, scrape_s, expected):
    assert step_s(window_s, scrape_s) == expected


def test_the_query_asks_for_the_five_figures_per_job_over_the_window():
    q = usage_query(604800, 61)
    assert "\n" not in q and q.count(" or ") == 4
    for name in FIGURES:
        assert f'"figure", "{name}", "", "")' in q
    assert 'DCGM_FI_DEV_GPU_UTIL{hpc_job!=""}[604800s]' in q and "< 10)[604800s:61s]" in q
    assert 'increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{hpc_job!=""}[604800s])' in q


def test_the_query_on_dcgm_series_gives_each_job_its_own_figures(tmp_path):
    expected = {
        ("42", "util_sum"): 31 * 100 + 60 * 5, ("42", "util_samples"): 61 + 60,   # mean 28.1 %
        ("42", "idle_steps"): 30 + 60, ("42", "steps"): 61 + 60,                   # 90 of 121 steps idle
        # the counters grew 59 x (24 + 6) MJ in 59 minutes; increase() extrapolates half a scrape
        # interval past the last sample (the range goes on: Prometheus's extrapolatedRate)
        ("42", "energy_mj"): 59 * 30e6 * 59.5 / 59,
        ("43", "util_sum"): 61 * 90, ("43", "util_samples"): 61, ("43", "steps"): 61,  # never idle: no idle_steps
    }
    samples = {f'{{figure="{f}", hpc_job="{job}"}}': v for (job, f), v in expected.items()}
    out = promtool_test(tmp_path, SERIES, [(usage_query(7200, 60), "120m", samples)])
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_wrong_figure_fails_promtool(tmp_path):
    """The test above can fail: one expected value off."""
    out = promtool_test(tmp_path, SERIES, [(usage_query(7200, 60), "120m", {'{figure="steps", hpc_job="43"}': 60})])
    assert out.returncode == 1 and 'got: {figure="energy_mj", hpc_job="42"}' in out.stdout + out.stderr


def test_the_parser_sums_each_figure_per_job_and_sets_nan_and_inf_aside():
    got = figures(read("week.json"))
    assert set(got.jobs) == {"1001", "1002", "1004", "1005", "1007", "1009", "1010", "987"}
    assert got.jobs["1001"] == JobUse(76800, 960, 59, 236, 7.2e9) and got.jobs["1001"].mean_util == 80.0
    assert got.jobs["1005"] == JobUse(729600, 7680, None, 1888, None)       # never idle, no energy series
    assert got.jobs["1009"].energy_mj is None and got.jobs["987"].energy_mj is None  # "NaN", "+Inf"
    assert got.ignored == 2 and got.warnings == []


def test_a_partial_answer_keeps_what_is_there_and_prometheus_s_warnings():
    got = figures(read("partial.json"))
    assert got.jobs["1001"].mean_util == 80.0 and got.jobs["1001"].idle_steps is None
    assert got.jobs["1004"] == JobUse(energy_mj=1.44e10) and got.jobs["1004"].mean_util is None
    assert got.jobs["1002"].mean_util is None                                # util_sum NaN: no mean
    assert got.warnings == ["remote_read: remote storage at http://10.0.0.50:9201/read is not responding"]


def test_an_empty_answer_is_no_job():
    got = figures(read("empty.json"))
    assert got.jobs == {} and got.ignored == 0


@pytest.mark.parametrize("name, words", [
    ("too_many_samples.json", "execution: query processing would load too many samples into memory"),
    ("timeout.json", "timeout: query timed out in query execution"),
    ("bad_data.json", 'bad_data: invalid parameter "query": 1:118: parse error'),
])
def test_prometheus_s_errors_are_refusals_with_its_words(name, words):
    with pytest.raises(Refused) as e:
        figures(read(name))
    assert words in str(e.value)


@pytest.mark.parametrize("text, words", [
    (read("matrix.json"), "resultType 'matrix', not the instant vector asked for"),
    (read("not_found.txt"), "not JSON: '404 page not found'"),
    ("", "an empty answer"),
    ("[1, 2]", "not a Prometheus API answer"),
    ('{"status": "success"}', "no data.result list"),
    ('{"status": "success", "data": {"resultType": "vector", "result": {}}}', "no data.result list"),
])
def test_what_is_not_such_an_answer_is_not_understood_saying_why(text, words):
    with pytest.raises(NotUnderstood) as e:
        figures(text)
    assert words in str(e.value)


def test_elements_of_another_shape_are_ignored_never_raised():
    result = [{"metric": {"figure": "util_sum", "hpc_job": "7"}, "value": [1, "50"]},
              {"metric": {"figure": "util_samples", "hpc_job": "7"}, "value": [1, "2"]},
              {"metric": {"figure": "util_sum"}, "value": [1, "1"]},                  # no job
              {"metric": {"figure": "other", "hpc_job": "7"}, "value": [1, "1"]},     # not a figure
              {"metric": {"figure": "steps", "hpc_job": "7"}, "value": [1, 2]},       # a number, not a string
              {"metric": {"figure": "steps", "hpc_job": "7"}, "value": [1]},
              {"metric": {"figure": "steps", "hpc_job": "7"}, "histogram": [1, {"count": "2"}]},
              {"metric": {"figure": "steps", "hpc_job": "7"}, "value": [1, "-Inf"]},
              {"metric": "steps", "value": [1, "3"]}, "text"]
    got = figures(json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}))
    assert got.jobs == {"7": JobUse(util_sum=50, util_samples=2)} and got.ignored == 8


def test_the_command_is_curl_on_the_node_bounded_every_value_one_word():
    q = usage_query(604800, 61)
    words = shlex.split(prom_command("10.0.0.10", 9090, q, 1772928000))
    assert words[:5] == ["curl", "-sS", "--globoff", "--max-time", "75"]
    assert words[-1] == "http://10.0.0.10:9090/api/v1/query"
    forms = [words[i + 1] for i, w in enumerate(words) if w == "--data-urlencode"]
    assert forms == [f"query={q}", "time=1772928000", "timeout=60s"]
    assert shlex.split(prom_command("fd00::10", 9090, q, 1))[-1] == "http://[fd00::10]:9090/api/v1/query"
