"""The `packages:` section: where the nodes' packages come from (the distribution's mirrors, or a signed
bundle: corral/bundle/), and operating-system package upgrades, rolled out with the rollout policy
(deploy/upgrades.py plans them, workflows/upgrade_rollout.py carries them out)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from corral.spec.models_base import LOCAL_PATH, Strict
from corral.spec.types import Fingerprint, HostPort, NoProxy, PackageName, ProxyUrl


class PackagesSpec(Strict):
    """Where packages come from, and apt upgrades of the nodes' packages (Debian family), node by node under
    `rollout:`."""

    source: Literal["mirror", "bundle"] = Field(
        default="mirror", description="mirror: the nodes' own apt sources (the virtual cluster: corral's local "
                                      "repository); bundle: only the signed bundle's repository (air-gapped sites)")
    bundle: str | None = Field(default=None, pattern=LOCAL_PATH,
                               description="the bundle file (`corral bundle build`; relative: to the spec file)")
    fingerprint: Fingerprint | None = Field(default=None, pattern=r"^[0-9A-Fa-f]{40}$",
                                    description="the 40-hex-digit fingerprint of the key the bundle must be signed "
                                                "with (printed by `corral bundle build`); unset: this state "
                                                "dir's own key")
    serve: HostPort | None = Field(default=None,
                                   description="ADDRESS:PORT on the control host where plan and apply serve the "
                                               "bundle's repository to the nodes (an address of this host that the "
                                               "nodes reach); the nodes' apt then reads that source alone. Unset on a "
                                               "virtual cluster: its bridge serves the bundle")

    upgrade: Literal["none", "security", "all"] = Field(
        default="none", description="none: corral upgrades nothing it did not pin; security: upgrades from a "
                                    "-security suite; all: every upgradable package (apt-get upgrade "
                                    "--with-new-pkgs)")
    hold: list[PackageName] = Field(default_factory=list, description="packages kept at their installed version "
                                                                      "(apt-mark hold) on every node")


class ProxySpec(Strict):
    """A site's outbound proxy (instead of an air gap): apt, corral's downloads (curl), users' shells and
    jobs (/etc/environment), and the container engine use it; the cluster's own names and addresses
    never go through it."""

    http: ProxyUrl | None = Field(default=None, description="proxy for http:// (e.g. http://proxy.example.com:3128)")
    https: ProxyUrl | None = Field(default=None, description="proxy for https:// (usually the same URL: CONNECT)")
    no_proxy: list[NoProxy] = Field(default_factory=list,
                                    description="hosts, .domains, addresses or networks reached directly; the "
                                                "cluster's node names and addresses and localhost always are")
