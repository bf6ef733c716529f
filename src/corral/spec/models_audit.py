"""The `audit:` section: what the site runs on its nodes besides corral's components (an agent, a directory
server, a backup client), declared so that `corral audit` lists it as the site's and not as a finding
(checks/audit.py; corral's own daemons are declared in components/daemons.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from corral.spec.models_base import Strict
from corral.spec.types import UnitName, UnixUser

# what `ps -o comm` shows: at most 15 characters
ProcessName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@()+-]{1,15}$")]
Reason = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ,.;:()'/_@+-]{0,199}$")]


class DeclaredListener(Strict):
    """A socket the site's daemon listens on."""

    port: int = Field(ge=0, le=65535, description="the port (0: one it picks at start)")
    proto: Literal["tcp", "udp"] = Field(default="tcp", description="tcp or udp")
    on: Literal["any", "cluster", "local"] = Field(default="any", description="which addresses: any, the node's "
                                                                              "cluster address, or loopback only")
    who: Reason = Field(description="who may reach it (said in the audit's listing)")


class DeclaredDaemon(Strict):
    """A daemon of the site's: its unit, user and why, the processes that run as root in it, its sockets."""

    roles: list[Literal["controller", "compute", "login", "accounting", "monitoring", "nfs", "control-plane",
                        "worker"]] = Field(default_factory=list, description="the nodes of these roles; empty: "
                                                                            "every node")
    unit: UnitName = Field(description="the systemd unit its processes run in (a glob: getty@*.service)")
    user: UnixUser = Field(description="the user its main process runs as")
    why: Reason = Field(description="why it runs, and why as that user (said in the audit's listing)")
    root: list[ProcessName] = Field(default_factory=list, max_length=32,
                                    description="the process names (as ps shows them) that run as root in the unit")
    listens: list[DeclaredListener] = Field(default_factory=list, max_length=32, description="its sockets")


class AuditSpec(Strict):
    """`corral audit`: what the site declares on its nodes beside corral's components."""

    declared: list[DeclaredDaemon] = Field(default_factory=list, max_length=128,
                                           description="the site's daemons (corral's own are declared by corral)")
