"""Parsers of the acceptance tools' output (pure; tests/fixtures/acceptance/ has captures and says where
each format comes from):

- `dcgmi diag -r LEVEL -j`: DCGM 4.x prints {"DCGM Diagnostic": {"test_categories": [{"category",
  "tests": [{"name", "results": [{"entity_group": "GPU", "entity_id", "status", "warnings": [{"warning",
  "error_id", ...}], "info"}], "test_summary": {"status", ...}}]}]}, "entity_groups", "metadata"}
  (dcgmi/Diag.cpp HelperJsonBuildOutput, testing/python3/dcgm_diag_schema.json); DCGM 3.x prints
  {"DCGM GPU Diagnostic": {"test_categories": [... "results": [{"gpu_id": "0", "status", "warnings",
  "info"}]]}, "version", "Driver Version Detected", "GPU Device IDs"}, its Deployment tests with one
  result and no GPU (3.x writes such a warning's text under "warnings", not "warning"). A failure to
  run is {"<root>": {"version", "runtime_error"}}. Statuses: Pass, Fail, Warn, Skip, Not Run. dcgmi
  exits non-zero when a test fails: the JSON is read whatever the exit status.
- gpu_burn (github.com/wilicc/gpu-burn, gpu_burn-drv.cpp): progress records, redrawn with "\\r",
  `37.5%  proc'd: 2916 (49187 Gflop/s) - 2916 (49123 Gflop/s)   errors: 0 - 0   temps: 51 C - 49 C `
  (an errors entry may read `-524288000  (WARNING!)` or `(DIED!)`, a dead GPU's count -1), then
  `Tested N GPUs:` and `\\tGPU i: OK|FAULTY`. It always exits 0: FAULTY is read from the text.
- all_reduce_perf (github.com/NVIDIA/nccl-tests, src/util.cu): `#` header lines (`# nThread 1 nGpus 8
  ...`, `#  Rank  0 Group  0 Pid ... device  0 [...] NAME`), one row per size: size count type redop
  root, then time algbw busbw #wrong out-of-place and in-place (`N/A` without a check; no root column
  before 2.13), `# Out of bounds values : 0 OK`, `# Avg bus bandwidth    : 84.8558`; failures print
  `HOST: Test NCCL failure common.cu:LINE '...'` (or CUDA)."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field

STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip", "not run": "skip"}


@dataclass(frozen=True)
class DiagResult:
    category: str
    test: str
    entity: str | None   # "GPU 0", "CPU 0"; None: the test as a whole
    status: str          # pass | fail | warn | skip
    messages: tuple[str, ...] = ()


@dataclass
class Diag:
    version: str | None = None
    error: str | None = None               # runtime_error: the diagnostic did not run
    results: list[DiagResult] = field(default_factory=list)


def _messages(entry: dict) -> tuple[str, ...]:
    out = []
    for w in entry.get("warnings") or []:
        text = w.get("warning", w.get("warnings")) if isinstance(w, dict) else w
        if text:
            out.append(" ".join(str(text).split()))
    return tuple(out)


def _status(raw: object) -> str:
    return STATUS.get(str(raw).strip().lower(), "warn")  # a status corral does not know: looked at


def _entity(entry: dict) -> str | None:
    if "entity_id" in entry:
        return f"{entry.get('entity_group', 'GPU')} {entry['entity_id']}"
    return f"GPU {entry['gpu_id']}" if "gpu_id" in entry else None


def parse_dcgm_diag(text: str) -> Diag:
    """`dcgmi diag -j` output (DCGM 3.x or 4.x) -> results; ValueError when it is not that JSON."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON in the output")
    data = json.loads(text[start:end + 1])
    root = data.get("DCGM Diagnostic", data.get("DCGM GPU Diagnostic")) if isinstance(data, dict) else None
    if not isinstance(root, dict):
        raise ValueError("not dcgmi diag JSON (no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' object)")
    meta = data.get("metadata") or {}
    diag = Diag(version=meta.get("version") or data.get("version") or root.get("version"),
                error=root.get("runtime_error"))
    for cat in root.get("test_categories") or []:
        for test in cat.get("tests") or []:
            if not isinstance(test, dict):  # 3.x leaves null where it skipped an array index
                continue
            name, got = str(test.get("name", "?")), []
            for r in test.get("results") or []:
                got.append(DiagResult(str(cat.get("category", "?")), name, _entity(r), _status(r.get("status")),
                                      _messages(r)))
            summary = test.get("test_summary")
            if isinstance(summary, dict):  # 4.x: the test's verdict, with errors tied to no entity
                status = _status(summary.get("status"))
                if not got or (status in ("fail", "warn") and all(r.status != status for r in got)):
                    got.append(DiagResult(str(cat.get("category", "?")), name, None, status, _messages(summary)))
            diag.results += got
    return diag


@dataclass
class BurnGpu:
    index: int
    gflops: float      # median of its reports over the second half of the run (0: none)
    errors: int        # the largest error count a report showed
    died: bool
    faulty: bool | None  # gpu_burn's own verdict (None: it printed none)


RECORD = re.compile(r"proc'd:(?P<procd>.*?)errors:(?P<errors>.*?)temps:")
PROCD = re.compile(r"(-?\d+) \((\d+(?:\.\d+)?) Gflop/s\)")
ERRORS = re.compile(r"(-?\d+)\s*(\((?:WARNING|DIED)!\))?")
VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\s*$")
TESTED = re.compile(r"Tested (\d+) GPUs:")


def parse_gpu_burn(text: str) -> tuple[list[BurnGpu], int | None]:
    """gpu_burn's output -> (per GPU figures, the N of "Tested N GPUs:" or None when it never finished)."""
    samples: dict[int, list[float]] = {}
    errors: dict[int, int] = {}
    died: set[int] = set()
    faulty: dict[int, bool] = {}
    tested = None
    for line in re.split(r"[\r\n]", text):
        m = RECORD.search(line)
        if m:
            for i, (count, gflops) in enumerate(PROCD.findall(m["procd"])):
                samples.setdefault(i, [])
                if int(count) > 0:
                    samples[i].append(float(gflops))
                elif int(count) < 0:
                    died.add(i)
            for i, (n, note) in enumerate(ERRORS.findall(m["errors"])):
                errors[i] = max(errors.get(i, 0), abs(int(n)))
                if note == "(DIED!)":
                    died.add(i)
            continue
        if t := TESTED.search(line):
            tested = int(t[1])
        elif v := VERDICT.match(line):
            faulty[int(v[1])] = v[2] == "FAULTY"
    out = []
    for i in sorted(set(samples) | set(faulty)):
        s = samples.get(i, [])
        late = s[len(s) // 2:]
        out.append(BurnGpu(i, statistics.median(late) if late else 0.0, errors.get(i, 0), i in died, faulty.get(i)))
    return out, tested


@dataclass
class NcclRun:
    busbw: list[float] = field(default_factory=list)    # every row's out-of-place and in-place busbw, GB/s
    wrong: int = 0                                       # the rows' #wrong, summed
    avg_busbw: float | None = None                       # "# Avg bus bandwidth"
    out_of_bounds: int | None = None                     # "# Out of bounds values"
    ngpus: int | None = None                             # "# nThread 1 nGpus N"
    ranks: int = 0                                       # "#  Rank" lines
    failures: list[str] = field(default_factory=list)    # "Test NCCL failure" / "Test CUDA failure" lines
    sizes: int = 0

    @property
    def peak_busbw(self) -> float | None:
        return max(self.busbw) if self.busbw else None


def _num(token: str) -> float:
    return 0.0 if token == "N/A" else float(token)


def parse_all_reduce(text: str) -> NcclRun:
    run = NcclRun()
    for line in text.splitlines():
        s = line.strip()
        if "Test NCCL failure" in s or "Test CUDA failure" in s or "Test failure" in s:
            run.failures.append(s[:200])
        elif m := re.match(r"#\s*Avg bus bandwidth\s*:\s*(\S+)", s):
            run.avg_busbw = float(m[1])
        elif m := re.match(r"#\s*Out of bounds values\s*:\s*(\d+)", s):
            run.out_of_bounds = int(m[1])
        elif m := re.match(r"#\s*nThread \d+ nGpus (\d+)", s):
            run.ngpus = int(m[1])
        elif re.match(r"#\s+Rank\s+\d+", s):
            run.ranks += 1
        elif s and not s.startswith("#"):
            t = s.split()
            if len(t) == 12:  # before nccl-tests 2.13: no root column
                t.insert(4, "-1")
            if len(t) < 13 or not t[0].isdigit():
                continue
            try:
                row = [_num(x) for x in t[5:13]]
            except ValueError:
                continue
            run.sizes += 1
            run.busbw += [row[2], row[6]]
            run.wrong += int(row[3]) + int(row[7])
    return run
