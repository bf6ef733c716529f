"""The support matrix's vocabulary: the components and sources it is kept for, and the three states a
(release, component, source) combination can be in (docs/releases.md, "Support matrix").

- Live: corral's vcluster tests run it on a live (virtual) node; `test` names one such test.
- Offline: tested without a live node only; `test` names the test, `not_run` says what was not run.
- Refused: spec check refuses a spec asking for it, located at the key that asks, with `fix` (what to do
  instead); `rule` names the rule that refuses it ("support": spec/rules_support.py reads this cell).

The cells are in spec/support_matrix.py, what a spec asks for in spec/support_asks.py. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Live:
    test: str       # "tests/vcluster/<file>.py::<test>"
    note: str = ""  # what stood in for what (a TEST package, the virtual cluster's repository)


@dataclass(frozen=True)
class Offline:
    test: str
    not_run: str    # what no test ran


@dataclass(frozen=True)
class Refused:
    why: str
    fix: str
    rule: str = "support"  # the spec rule refusing it: "support" (this matrix), or an older rule's name


State = Live | Offline | Refused

# where a component's packages come from, as a spec says it
SOURCES: Mapping[str, str] = MappingProxyType({
    "distribution": "the release's own archive",
    "vendor": "the vendor's repository",   # NVIDIA's (CUDA, libnvidia-container, GitHub releases), Grafana's
    "mirror": "a site mirror",             # repo_url / url set, or the nodes' own apt sources (virtual: corral's)
    "bundle": "the bundle",                # packages.source: bundle
})

COMPONENTS: Mapping[str, str] = MappingProxyType({
    "driver": "NVIDIA driver",
    "fabric-manager": "Fabric Manager",
    "cuda-toolkit": "CUDA toolkit",
    "nccl": "NCCL (acceptance tests)",
    "dcgm": "DCGM",
    "dcgm-exporter": "DCGM exporter",
    "container-toolkit": "NVIDIA container toolkit",
    "enroot": "enroot",
    "pyxis": "pyxis",
    "apptainer": "Apptainer",
    "slurm": "Slurm (the archive's major)",
    "slurm-newer": "Slurm (a newer major)",
    "prometheus": "Prometheus stack",
    "grafana": "Grafana",
})

# vcluster test names a cell may name before they exist (a test being written beside the cell; none now: the
# Debian 13 driver's and apptainer's are in): the table marks them "being written"
PENDING: frozenset[str] = frozenset()
