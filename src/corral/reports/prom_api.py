"""Prometheus HTTP API answers (pure): the envelope of /api/v1/query and the per-job figures in it.

The envelope (prometheus.io/docs/prometheus/latest/querying/api): `{"status": "success"|"error",
"data": {"resultType": "vector"|"matrix"|"scalar"|"string", "result": ...}, "errorType", "error",
"warnings": [...], "infos": [...]}`; an error comes with HTTP 400 (bad parameters), 422 (the
expression cannot run, e.g. too many samples) or 503 (timed out, aborted). A vector's element is
`{"metric": {labels}, "value": [<unix time>, "<value>"]}`: the value is a string, `"NaN"`, `"+Inf"`
and `"-Inf"` included (a native histogram comes as `"histogram"` instead: not a figure here).

Never raises on its input except `Refused` (Prometheus said error) and `NotUnderstood` (not an
answer of that shape), each with the reason the report prints.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from corral.reports.promql import FIGURES, LABEL


class Refused(Exception):
    """Prometheus answered status "error": its errorType and error."""


class NotUnderstood(Exception):
    """Not a Prometheus API answer of the expected shape: what was wrong."""


@dataclass(slots=True)
class JobUse:
    """The figures of one Slurm job id (all its GPUs, all its runs in the window); None: no sample."""

    util_sum: float | None = None
    util_samples: float | None = None
    idle_steps: float | None = None
    steps: float | None = None
    energy_mj: float | None = None

    @property
    def mean_util(self) -> float | None:
        """Mean GPU utilisation, % (None: no sample)."""
        if not self.util_samples or self.util_sum is None:
            return None
        return self.util_sum / self.util_samples


@dataclass(slots=True)
class Figures:
    jobs: dict[str, JobUse] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    ignored: int = 0              # elements without a job, a figure or a finite value


def _value(element: dict) -> float | None:
    """The element's value as a finite float; None for NaN, an infinity, or no "value" pair."""
    pair = element.get("value")
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        return None
    try:
        v = float(pair[1])
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def envelope(text: str) -> dict:
    """The `data` of a successful answer; Refused or NotUnderstood otherwise."""
    try:
        answer = json.loads(text)
    except ValueError:
        first = " ".join(text.split())[:160]
        raise NotUnderstood(f"not JSON: {first!r}" if first else "an empty answer") from None
    if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
        raise NotUnderstood("no \"status\" of success or error: not a Prometheus API answer")
    if answer["status"] == "error":
        kind, error = answer.get("errorType") or "error", " ".join(str(answer.get("error") or "").split())
        raise Refused(f"{kind}: {error[:300] or 'no error text'}")
    data = answer.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise NotUnderstood("no data.result list in a successful answer")
    return answer


def figures(text: str) -> Figures:
    """The answer to promql.usage_query -> Figures: per hpc_job, each figure summed over its elements."""
    answer = envelope(text)
    data = answer["data"]
    if data.get("resultType") != "vector":
        raise NotUnderstood(f"resultType {data.get('resultType')!r}, not the instant vector asked for")
    out = Figures(warnings=[" ".join(str(w).split())[:300] for w in answer.get("warnings") or []][:5])
    for element in data["result"]:
        labels = element.get("metric") if isinstance(element, dict) else None
        if not isinstance(labels, dict):
            out.ignored += 1
            continue
        job, name, value = labels.get("hpc_job"), labels.get(LABEL), _value(element)
        if not job or name not in FIGURES or value is None:
            out.ignored += 1
            continue
        use = out.jobs.get(job)
        if use is None:
            use = out.jobs[job] = JobUse()
        setattr(use, name, (getattr(use, name) or 0.0) + value)
    return out
