"""perftest's `ib_write_bw` output (pure). Its result table (perftest's perftest_parameters.h RESULT_FMT /
RESULT_FMT_G and REPORT_FMT): a dashed line, the header ` #bytes     #iterations    BW peak[Gb/sec]
BW average[Gb/sec]   MsgRate[Mpps]` (MB/sec without --report_gbits), one row per message size, a dashed
line. `srun -l` prefixes each line with the task number ("1: "), which is read and dropped."""

from __future__ import annotations

import re
from dataclasses import dataclass

from corral.errors import CorralError

_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>Gb/sec|MB/sec)\]\s+BW average\[(?:Gb|MB)/sec\]")
_ROW = re.compile(r"^\s*(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>\d+(?:\.\d+)?)\s+(?P<avg>\d+(?:\.\d+)?)")
_TASK = re.compile(r"^\s*\d+:\s?")


@dataclass(frozen=True)
class WriteBw:
    size: int          # bytes per message
    peak_gbps: float   # Gb/s
    avg_gbps: float


def parse_ib_write_bw(text: str) -> WriteBw:
    """The last result row (the largest size run); refused (with the output's last line) without one."""
    lines = [_TASK.sub("", line, count=1) for line in text.splitlines()]
    unit, rows = None, []
    for line in lines:
        m = _HEADER.search(line)
        if m:
            unit = m["unit"]
            continue
        r = _ROW.match(line)
        if unit and r:
            scale = 1.0 if unit == "Gb/sec" else 8 / 1000  # MB/sec (10^6 bytes) -> Gb/s
            rows.append(WriteBw(int(r["bytes"]), round(float(r["peak"]) * scale, 2), round(float(r["avg"]) * scale, 2)))
    if not rows:
        last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
        raise CorralError("no ib_write_bw result in the output", value=last[:160],
                          fix="run the pair by hand (docs/components/fabric.md) and read perftest's error")
    return rows[-1]
