"""Shared CLI pieces: spec resolution, consoles, JSON output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from corral.spec.cluster import Cluster
from corral.spec.loader import load

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

SpecOpt = typer.Option(None, "--spec", "-f", envvar="CORRAL_SPEC",
                       help="cluster.yaml to use (default: ./cluster.yaml, or $CORRAL_SPEC)")
JsonOpt = typer.Option(False, "--json", help="print one JSON object instead of text")


def spec_path(spec: Optional[Path]) -> Path:
    return spec if spec is not None else Path("cluster.yaml")


def load_cluster(spec: Optional[Path]) -> Cluster:
    return load(spec_path(spec))


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def is_tty() -> bool:
    return out.is_terminal and os.environ.get("TERM") != "dumb"
