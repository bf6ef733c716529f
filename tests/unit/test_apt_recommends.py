"""One apt policy on every path (issue 48): no install corral writes takes what apt merely recommends, so a node's
package set does not depend on the route it took (a deploy, a rollout, a bundle's resolution, the virtual image)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corral.render import apt

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"
NO_RECOMMENDS = "--no-install-recommends"
# files whose `apt-get ... install/upgrade` words are not commands
NOT_COMMANDS = {"spec/models_packages.py": "a field's description", "engine/timing.py": "the pattern that recognises "
                "installs in a run's timings"}


@pytest.mark.parametrize("flags", [{}, {"downgrade": True}, {"confold": True}, {"held": True, "timeout_s": 300},
                                   {"downgrade": True, "confold": True, "words": '"$tmp/0.deb"'}])
def test_every_install_script_leaves_recommends_out(flags):
    assert NO_RECOMMENDS in apt.install_script(["slurmd=24.11.5-1"], **flags).split()


def test_no_other_writer_of_an_install_and_none_that_could_ask_for_recommends():
    """`apt-get install`/`upgrade` words in code outside render/apt.py (error messages aside) carry the flag;
    install_script has no parameter to take it away."""
    found = []
    for path in SRC.rglob("*.py"):
        if str(path.relative_to(SRC)) in ("render/apt.py", *NOT_COMMANDS):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"apt-get\b[^\"']*\b(install|upgrade)\b", code) and "fix=" not in code \
                    and "print-uris" not in code and "download-only" not in code and "`" not in code \
                    and NO_RECOMMENDS not in code and "install_script" not in code:
                found.append(f"{path.relative_to(SRC)}:{i}: {line.strip()[:100]}")
    assert found == [], found
    import inspect
    assert "recommends" not in inspect.signature(apt.install_script).parameters


def test_the_bundle_and_the_virtual_image_resolve_under_the_same_policy():
    assert NO_RECOMMENDS in (SRC / "bundle" / "resolve.py").read_text()
    assert 'APT::Install-Recommends "false"' in (SRC / "virtual" / "image.py").read_text()
