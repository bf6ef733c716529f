"""corral's layers, written once: the import rule tests/unit/test_layers.py enforces and the block
docs/architecture.md shows (`python -m corral.layers` prints it).

A module may import modules of its own package and of any layer below its own; never a layer above,
nor another package of its own layer. node/ runs on the nodes: stdlib only, it imports nothing of corral.
"""

from __future__ import annotations

# (layer packages, what they hold), top to bottom
LAYERS: list[tuple[tuple[str, ...], str]] = [
    (("__main__",), "python -m corral"),
    (("cli",), "typer app, one module per command group; renders results; exit codes"),
    (("workflows", "backup", "fanout"), "what a command does: converge, driver and MIG rollouts, facts report; "
                                        "backup and restore; node-local converge through Slurm"),
    (("checks", "deploy", "virtual", "importers", "reports"), "doctor/validate/health; pyinfra deploys per "
                                                              "component; the virtual cluster; DeepOps import; "
                                                              "usage reports"),
    (("bundle",), "offline bundles: resolve, sign, verify, diff, serve, coverage"),
    (("components",), "what each component is, declared once (deploy, waits, packages, daemons) and the "
                      "views derived from it"),
    (("engine", "render"), "inventory, plan/apply, results, journal, host keys, operation contract, "
                           "command quoting; config text"),
    (("facts",), "pyinfra facts (command + pure parser) and the fact records the cache holds"),
    (("spec",), "pydantic models, typed strings, YAML with file:line errors, hostlists, rules"),
    (("site_ca", "workbench_wheels"), "the cluster's CA and the certificates it signs; the workbench venvs' pinned files"),
    (("secrets", "limits", "parallel", "paths", "digest", "pinned_files"),
     "state-dir secrets, input limits, a thread pool, on-node paths, file digests, files fetched by their pin"),
    (("errors", "layers", "__version__"), "CorralError and its located problems; this list"),
]
NODE = "node"  # stdlib-only programs installed on nodes


def layer_of(package: str) -> int:
    for i, (packages, _) in enumerate(LAYERS):
        if package in packages:
            return i
    raise KeyError(package)


def _names(packages: tuple[str, ...]) -> str:
    return " ".join(p if p.startswith("__") else f"{p}/" if p not in FILES else f"{p}.py" for p in packages)


FILES = ("secrets", "limits", "parallel", "paths", "digest", "pinned_files", "site_ca", "workbench_wheels", "errors",
         "layers")  # modules, not packages


def diagram() -> str:
    width = max(len(_names(p)) for p, _ in LAYERS) + 2
    rows = [_names(packages).ljust(width) + what for packages, what in LAYERS]
    rows.append(f"{NODE}/".ljust(width) + "runs ON nodes (stdlib only): health, prolog/epilog, Slurm exporter")
    return "\n".join(rows)


if __name__ == "__main__":
    print(diagram())
