"""`corral plan`, `corral apply`, `corral up` (filled in when the engine lands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass
