"""The support matrix (spec/support_matrix.py) against what spec check does: specs over the whole product
(each release x each component alone, all, none x each source, real and virtual) are built; every spec
spec check accepts asks only for combinations with a state; every combination the matrix refuses is
refused by spec check, located, with the cell's fix; every test a cell names exists; docs/releases.md's
table is the matrix's."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from corral.errors import SpecError
from corral.spec.cluster import rebuild
from corral.spec.loader import load_text
from corral.spec.models import ClusterSpec
from corral.spec.releases import RELEASES
from corral.spec.rules import spec_warnings
from corral.spec.support import COMPONENTS, PENDING, SOURCES, Live, Offline, Refused
from corral.spec.support_asks import asks
from corral.spec.support_matrix import MATRIX, dcgm_unavailable, state
from corral.spec.support_table import main as table_main, rewrite

ROOT = Path(__file__).resolve().parents[2]
MIRROR = "https://mirror.example.com/nvidia"
OFF = {"nvidia": {"dcgm": {"enabled": False}},
       "monitoring": {"grafana": {"enabled": False}, "dcgm_exporter": {"enabled": False}}}


def _base(release: str, virtual: bool) -> dict:
    nodes = [("ctl", "10.213.99.10", ["controller", "monitoring"], None),
             ("gpu01", "10.213.99.11", ["compute"], {"count": 4, "model": "h100"}),
             ("login1", "10.213.99.12", ["login"], None)]
    spec = {"name": "lab", "nodes": [{"names": n, "addresses": [a], "roles": r, "os": release, **({"gpus": g} if g else {})}
                                     for n, a, r, g in nodes]}
    if virtual:
        spec["virtual"] = {"subnet": "10.213.99.0/24"}
    return spec


def _component(name: str, source: str) -> dict:
    """The spec keys that ask for `name` from `source` (on top of OFF); {} where the spec has no way to."""
    url = {"mirror": MIRROR}.get(source)
    cuda = {"repo_url": url} if url else {}
    driver = {"version": "550.163.01", **({"source": "distribution"} if source == "distribution" else cuda)}
    vendor = source in ("vendor", "mirror", "bundle")
    return {
        "driver": {"nvidia": {"driver": driver}},
        "fabric-manager": {"nvidia": {"driver": {"version": "550.163.01", **cuda}}} if vendor else {},
        "cuda-toolkit": {"nvidia": {"cuda_toolkit": {"version": "12.4"}},
                         "monitoring": {"dcgm_exporter": cuda}} if vendor else
                        {"nvidia": {"cuda_toolkit": {"version": "12.4", "source": "distribution"}}},
        "nccl": {"nvidia": {"cuda_toolkit": {"version": "12.4"}}, "acceptance": {"nccl": {"enabled": True, "sha256": "skip"}},
                 "monitoring": {"dcgm_exporter": cuda}} if vendor else {},
        "dcgm": {"nvidia": {"dcgm": {"enabled": True}}, "monitoring": {"dcgm_exporter": cuda}} if vendor else {},
        "dcgm-default": {"nvidia": {"dcgm": {}}, "monitoring": {"dcgm_exporter": cuda}} if vendor else {},
        "dcgm-exporter": {"monitoring": {"dcgm_exporter": {"enabled": True, **cuda}}} if vendor else {},
        "container-toolkit": {"nvidia": {"container_toolkit": {"repo_url": url} if url else {}}} if vendor else {},
        "enroot": {"nvidia": {"enroot": {"version": "3.5.0", "sha256": "skip", **({"url": MIRROR + "/{package}.deb"}
                                                                                   if url else {})}}} if vendor else {},
        "pyxis": {"nvidia": {"enroot": {"version": "3.5.0", "sha256": "skip"},
                             "pyxis": {"version": "0.20.0", "sha256": "skip",
                                       **({"url": MIRROR + "/pyxis.tar.gz"} if url else {})}}} if vendor else {},
        "apptainer": {"images": {"apptainer": {"source": "mirror" if source == "mirror" else "corral"}}},
        "slurm": {}, "slurm-newer": {"slurm": {"version": "26.05"}},
        "prometheus": {},
        "grafana": {"monitoring": {"grafana": {"enabled": True, **cuda}}} if vendor else {},
    }[name]


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _dump(data: dict) -> str:
    import io
    buf = io.StringIO()
    YAML().dump(data, buf)
    return buf.getvalue()


def product():
    """(label, spec text) over release x (each component, all, none) x source x (real, virtual)."""
    for release in RELEASES:
        for virtual in (False, True):
            for source in SOURCES:
                variants = {c: _component(c, source) for c in [*COMPONENTS, "dcgm-default"]}
                every = functools.reduce(_merge, [variants[c] for c in COMPONENTS if c != "apptainer"], {})
                for label, extra in [*variants.items(), ("everything", every), ("nothing", {})]:
                    if not extra and label not in ("slurm", "prometheus", "nothing"):
                        continue
                    spec = _merge(_merge(_base(release, virtual), OFF), extra)
                    if label == "dcgm-default":
                        spec["nvidia"]["dcgm"].pop("enabled", None)
                    if source == "bundle":
                        spec["packages"] = {"source": "bundle", "bundle": "site.tar",
                                            **({} if virtual else {"serve": "10.213.99.1:8079"})}
                    yield f"{release} {'virtual' if virtual else 'real'} {source} {label}", _dump(spec)


def _asked(text: str):
    """What the spec asks for, from its models alone (no rules: a refused spec's asks too)."""
    spec = ClusterSpec.model_validate(YAML(typ="safe").load(text))
    return asks(rebuild(spec, Path("cluster.yaml")))


@functools.cache
def cases() -> list[tuple[str, str, list, object]]:
    """(label, text, asks, SpecError | the loaded cluster)."""
    out = []
    for label, text in product():
        try:
            result: object = load_text(text, "cluster.yaml")
        except SpecError as e:
            result = e
        out.append((label, text, _asked(text), result))
    return out


def test_every_spec_spec_check_accepts_asks_only_for_combinations_with_a_state():
    uncovered = sorted({(a.release, a.component, a.source, label) for label, _, asked, result in cases()
                        if not isinstance(result, SpecError) for a in asked if state(a.release, a.component, a.source)
                        is None})
    assert not uncovered, "accepted by spec check, but no state in spec/support_matrix.py:\n" + "\n".join(
        f"  {r} x {c} x {s}   (spec: {label})" for r, c, s, label in uncovered)


def test_every_refused_combination_is_refused_where_the_spec_asks_with_its_fix():
    hit = set()
    for label, _, asked, result in cases():
        for a in asked:
            cell = state(a.release, a.component, a.source)
            if not isinstance(cell, Refused):
                continue
            if a.defaulted:  # skipped on those nodes, and said
                assert isinstance(result, SpecError) or any(cell.why in w for w in spec_warnings(result)), label
                continue
            assert isinstance(result, SpecError), f"{label}: {a} is refused by the matrix but spec check took it"
            said = [p for p in result.problems if cell.fix in (p.fix or "")]
            assert said and all(re.fullmatch(r"cluster\.yaml:\d+:\d+", p.where) for p in said), (label, str(result))
            hit.add((a.release, a.component, a.source))
    refused = {k for k, v in MATRIX.items() if isinstance(v, Refused)}
    assert refused - hit == set(), "refused cells no spec of the product asks for"


def test_every_cell_is_a_combination_some_spec_asks_for():
    asked = {(a.release, a.component, a.source) for _, _, found, _ in cases() for a in found}
    assert set(MATRIX) - asked == set()


def _defined(path: Path) -> set[str]:
    """Test functions defined in a test file or imported into it from another test module."""
    tree = ast.parse(path.read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tests."):
            source = ROOT / (n.module.replace(".", "/") + ".py")
            defined = {f.name for f in ast.parse(source.read_text()).body if isinstance(f, ast.FunctionDef)}
            names |= {a.asname or a.name for a in n.names if a.name in defined}
    return names


def test_every_test_a_cell_names_exists():
    named = {c.test for c in MATRIX.values() if isinstance(c, (Live, Offline))}
    missing = sorted(t for t in named if t.partition("::")[2] not in _defined(ROOT / t.partition("::")[0]))
    assert [t for t in missing if t not in PENDING] == []
    assert all(isinstance(c, (Live, Offline)) for c in MATRIX.values() if not isinstance(c, Refused))


def test_the_default_debian_13_gpu_spec_passes_with_dcgm_skipped_and_said():
    text = _dump(_base("debian-13", False))
    warned = [w for w in spec_warnings(load_text(text, "cluster.yaml")) if "DCGM" in w]
    assert [w.split(" is on by default")[0] for w in warned] == ["nvidia.dcgm.enabled", "monitoring.dcgm_exporter.enabled"]
    assert dcgm_unavailable("debian-13") in warned[0] and dcgm_unavailable("debian-12") is None
    with pytest.raises(SpecError) as e:
        load_text(text.replace("name: lab\n", "name: lab\nnvidia:\n  dcgm:\n    enabled: true\n"), "cluster.yaml")
    assert str(e.value) == (
        "cluster.yaml:4:14: DCGM on debian-13 (nodes[1]: gpu01) from the vendor's repository: NVIDIA publishes no DCGM "
        "for Debian 13 (DCGM's supported distributions list Debian 12) (got 'os: debian-13'); fix: set "
        "nvidia.dcgm.enabled: false, or run the GPU nodes on debian-12")


def test_docs_releases_md_holds_the_generated_table(capsys):
    doc = ROOT / "docs" / "releases.md"
    assert rewrite(doc.read_text()) == doc.read_text(), \
        "docs/releases.md differs from spec/support_matrix.py: run python -m corral.spec.support_table --write docs/releases.md"
    assert table_main(["--check", str(doc)]) == 0
