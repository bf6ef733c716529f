"""The layers hold: every corral module imports only its own package and the layers below
(src/corral/layers.py), node/ imports nothing of corral, and docs/architecture.md shows the same list."""

from __future__ import annotations

import ast
from pathlib import Path

from corral import paths
from corral.layers import LAYERS, NODE, diagram, layer_of

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def corral_imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith("corral."):
            parts = node.module.split(".")
            targets = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
            out += [(node.lineno, t) for t in targets]
        elif isinstance(node, ast.ImportFrom) and node.module == "corral":
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("corral.")]
    return out


def violations() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        pkg = package_of(path)
        rel = path.relative_to(SRC.parent)
        for line, target in corral_imports(path):
            if target == pkg:
                continue
            if pkg == NODE:
                found.append(f"{rel}:{line}: node/ runs on nodes (stdlib only) but imports corral.{target}")
            elif layer_of(target) <= layer_of(pkg):
                found.append(f"{rel}:{line}: {pkg}/ imports {target}/ (layer {layer_of(target)} is not below "
                             f"layer {layer_of(pkg)}; see src/corral/layers.py)")
    return found


def test_every_package_has_a_layer():
    packages = {package_of(p) for p in SRC.rglob("*.py")} - {"__init__", NODE}
    assert sorted(p for p in packages if not any(p in ps for ps, _ in LAYERS)) == []


def test_imports_only_go_down():
    assert violations() == []


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "corral"
    (fake / "spec").mkdir(parents=True)
    (fake / "spec" / "bad.py").write_text("from corral.deploy import operations\nfrom corral.errors import X\n")
    (fake / "node").mkdir()
    (fake / "node" / "tool.py").write_text("import json\nfrom corral.spec import models\n")
    monkeypatch.setattr(__import__(__name__), "SRC", fake)
    assert [v.split(": ", 1)[0] for v in violations()] == ["corral/node/tool.py:2", "corral/spec/bad.py:1"]


def test_architecture_doc_shows_the_layers_as_written():
    text = DOC.read_text()
    assert f"```\n{diagram()}\n```" in text, f"docs/architecture.md: replace the layer block with:\n{diagram()}"


def test_node_programs_agree_with_the_paths_module():
    from corral.node import health, jobhooks
    assert health.DEFAULT_CONFIG == paths.HEALTH_CONFIG and jobhooks.CONFIG == paths.JOBHOOKS_CONFIG
