"""The `power:` section: Slurm's power saving, nodes powered off and on through their BMCs (Redfish).

Off by default. Each compute node that Slurm may power down needs a BMC: `power.bmc.nodes` maps node
names (a hostlist) to BMC addresses, one per node (`addresses`: a list, a hostlist or a range, as a
node group's) or one for all of them (`address`: a BMC or chassis manager holding several systems,
each found by the node's name). spec/rules_power.py checks the mapping against the nodes.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from corral.spec.models_base import LOCAL_PATH, Strict
from corral.spec.models_slurm import HOSTLIST
from corral.spec.types import Duration

MIN_SUSPEND_S = 10  # short, for a test cluster; a real one powers down after many minutes
# a BMC: an IPv4 address or a DNS name, an optional :port (an IPv6 BMC is written in brackets: [fd00::5]:443)
_BMC_ADDRESS = re.compile(r"([A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])(:\d{1,5})?")


def _bmc_address(v: str) -> str:
    if not _BMC_ADDRESS.fullmatch(v):
        raise PydanticCustomError("corral_value", "not host[:port] (an IP address or DNS name, then an optional "
                                                  "port; an IPv6 address in brackets)")
    return v


BmcAddress = Annotated[str, AfterValidator(_bmc_address)]


class BmcNodes(Strict):
    """Which BMC answers for which nodes."""

    names: str = Field(pattern=HOSTLIST, description="node names (a hostlist: gpu[01-16])")
    addresses: str | None = Field(
        default=None, description="one BMC IP address per name, in the same order: a hostlist 10.1.0.[11-26], "
                                  "a range 10.1.0.11-26 or a comma-separated list (no ports: `port` sets it)")
    address: BmcAddress | None = Field(default=None, max_length=260,
                                description="one BMC for all these names (host[:port]); each node is "
                                            "the Redfish system named as the node")


class BmcSpec(Strict):
    """How corral's power programs reach the nodes' BMCs."""

    protocol: Literal["redfish"] = Field(default="redfish", description="the BMC's API: Redfish "
                                         "(ComputerSystem.Reset On / GracefulShutdown)")
    scheme: Literal["https", "http"] = Field(default="https", description="http only with allow_http: "
                                             "true or in a virtual cluster (the credentials go in clear)")
    port: int | None = Field(default=None, ge=1, le=65535, description="port of every BMC of `addresses`; "
                                                                       "unset: the scheme's")
    verify_tls: bool = Field(default=True, description="check the BMC's certificate against the "
                                                       "controller's CAs; false: warned about on every run")
    credentials_file: str = Field(pattern=LOCAL_PATH, description="file on the control host (relative to the "
                                  "spec file) holding `user:password` on its first line; installed 0600 "
                                  "for the slurm user on the controllers, never shown")
    timeout_s: int = Field(default=20, ge=2, le=120, description="bound of one call to a BMC, seconds")
    nodes: list[BmcNodes] = Field(min_length=1, description="the BMC of each compute node")


class PowerSpec(Strict):
    """Slurm power saving: idle compute nodes powered off by their BMC, powered on for a job."""

    enabled: bool = Field(default=False, description="SuspendProgram/ResumeProgram in slurm.conf")
    suspend_after: Duration = Field(default=1800, le=7 * 86400, description="SuspendTime: a node idle this "
                                    f"long is powered off (seconds, or 30s, 30m, 2h; at least {MIN_SUSPEND_S}s)")
    resume_timeout: Duration = Field(default=600, ge=1, le=86400, description="ResumeTimeout: a node not "
                                "back in Slurm this long after its power-on is drained (its boot time and more)")
    suspend_timeout: Duration = Field(default=120, ge=1, le=86400, description="SuspendTimeout: how long a "
                                 "node takes to power off")
    exclude: str | None = Field(default=None, pattern=HOSTLIST, description="compute nodes never powered "
                                "off (SuspendExcNodes; compute nodes with another role are excluded anyway)")
    bmc: BmcSpec | None = Field(default=None, description="the nodes' BMCs (needed when enabled)")
