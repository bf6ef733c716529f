"""The `packages:` section: operating-system package upgrades, rolled out with the rollout policy
(deploy/upgrades.py plans them, workflows/upgrade_rollout.py carries them out)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from corral.spec.models_base import Strict
from corral.spec.types import PackageName


class PackagesSpec(Strict):
    """apt upgrades of the nodes' packages (Debian family), node by node under `rollout:`."""

    upgrade: Literal["none", "security", "all"] = Field(
        default="none", description="none: corral upgrades nothing it did not pin; security: upgrades from a "
                                    "-security suite; all: every upgradable package (apt-get upgrade "
                                    "--with-new-pkgs)")
    hold: list[PackageName] = Field(default_factory=list, description="packages kept at their installed version "
                                                                      "(apt-mark hold) on every node")
