"""Each unit test runs inside a fresh run context (engine/run_context.py), as every deploy and
operation does inside `corral.engine.run`: a test that prepares deploys or calls an operation by hand
finds one, and nothing one test leaves there reaches the next."""

import pytest

from corral.engine import run_context


@pytest.fixture(autouse=True)
def run_ctx():
    with run_context.active(run_context.RunContext()) as ctx:
        yield ctx
