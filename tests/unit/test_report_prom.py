"""`corral report usage`'s Prometheus query and answers: the PromQL (reports/promql.py) evaluated by the
real promtool on series shaped like dcgm-exporter's, the command and the python3 client it runs on the
monitoring node (reports/prom_query.py; here against a local stand-in), the parser (reports/prom_api.py)
on the answers of tests/fixtures/prometheus/ (README there)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from corral.reports.prom_api import JobUse, NotUnderstood, Refused, figures
from corral.reports.prom_query import CLIENT, prom_command
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


def test_the_command_is_the_client_on_the_node_bounded_every_value_one_word():
    q = usage_query(604800, 61)
    words = shlex.split(prom_command("10.0.0.10", 9090, q, 1772928000))
    assert words[:6] == ["timeout", "75", "python3", "-I", "-c", CLIENT]
    assert words[6:] == ["http://10.0.0.10:9090/api/v1/query", q, "1772928000", "60"]
    assert shlex.split(prom_command("fd00::10", 9090, q, 1))[6] == "http://[fd00::10]:9090/api/v1/query"


class Prometheus(BaseHTTPRequestHandler):
    """A stand-in answering /api/v1/query with (status, body) from the server's `answer`; records the form."""

    def do_POST(self):  # noqa: N802 - http.server's name
        form = self.rfile.read(int(self.headers["Content-Length"])).decode()
        self.server.forms.append((self.path, self.headers["Content-Type"], urllib.parse.parse_qs(form)))
        status, body = self.server.answer
        if status is None:
            time.sleep(1.5)
            status = 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    server = HTTPServer(("127.0.0.1", 0), Prometheus)
    server.forms, server.answer = [], (200, read("week.json"))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def client(port: int, limit: str = "60", env: dict | None = None) -> subprocess.CompletedProcess:
    """The client as the node runs it (without `timeout`), here against 127.0.0.1."""
    return subprocess.run([sys.executable, "-c", CLIENT, f"http://127.0.0.1:{port}/api/v1/query", "up", "1772928000",
                           limit], capture_output=True, text=True, timeout=30, env=env)


def test_the_client_posts_the_form_and_prints_the_answer(prometheus, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # root's proxy: never used for the cluster's address
    out = client(prometheus.server_port, env=dict(os.environ))
    assert out.returncode == 0 and out.stdout == read("week.json")
    [(path, kind, form)] = prometheus.forms
    assert path == "/api/v1/query" and kind == "application/x-www-form-urlencoded"
    assert form == {"query": ["up"], "time": ["1772928000"], "timeout": ["60s"]}


def test_the_client_prints_prometheus_s_error_body_whatever_the_http_status(prometheus):
    prometheus.answer = (422, read("too_many_samples.json"))
    out = client(prometheus.server_port)
    assert out.returncode == 0 and out.stdout == read("too_many_samples.json")


def test_the_client_exits_7_when_nothing_listens_and_28_when_too_slow(prometheus):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    out = client(port)
    assert out.returncode == 7 and "Connection refused" in out.stderr and out.stdout == ""
    prometheus.answer = (None, "{}")  # answers after 1.5 s; the client waits limit + 10 s: 0.5 s here
    out = client(prometheus.server_port, limit="-9.5")
    assert out.returncode == 28 and "timed out" in out.stderr
