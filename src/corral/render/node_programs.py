"""corral's own programs for the nodes (corral/node/*.py, stdlib only) as the text the deploys install
(health, job hooks, power, the Slurm exporter) and `corral render` writes: one place reads them."""

from __future__ import annotations

from importlib import resources


def node_program(module: str) -> str:
    """The text of corral/node/<module> (e.g. "health.py"), installed as it is."""
    return resources.files("corral.node").joinpath(module).read_text()
