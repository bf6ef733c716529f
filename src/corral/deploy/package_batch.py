"""One package transaction per node: every Debian package the node's later deploys install from the
repositories it already has (`operations.packages(..., together=True)`) is installed at once, before
any of them runs, with services kept from starting (a policy-rc.d that exists only for the
transaction) until their configuration is in place; each deploy's own service op then starts its
daemon once. Packages from a repository a deploy adds itself (NVIDIA's, Grafana's) keep their own
transaction, in their deploy.

The wanted names are collected while the run prepares the deploys (this deploy is prepared first,
its op runs first, after every deploy has been prepared), in the run's context
(engine/run_context.py): nothing survives the run. A later `packages` op whose names this transaction installed says so and runs nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.deploy.nodestate import Want, register, snapshot
from corral.engine import run_context
from corral.engine.notes import annotate
from corral.engine.shell import AND, Raw, cmd

POLICY = "/usr/sbin/policy-rc.d"
POLICY_TEXT = ("#!/bin/sh\n# corral: no service starts while packages install (removed after the transaction)\n"
               "exit 101\n")
POLICY_SHA = hashlib.sha256(POLICY_TEXT.encode()).hexdigest()
WANT = register(Want(paths=(POLICY,)))


@dataclass
class Batch:
    """One node's transaction in one run: the names later deploys want in it (filled while they are
    prepared), the names it covered (set when it runs, or is planned)."""

    wanted: list[str] = field(default_factory=list)
    done: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.done = set(self.done)

    def want(self, names: list[str]) -> None:
        self.wanted.extend(n for n in names if n not in self.wanted)

    def covers(self, names: list[str]) -> bool:
        return bool(names) and set(names) <= self.done


def batch() -> Batch | None:
    """This node's batch in this run (in the run's context); None before `package_batch` was
    prepared for it (a run without it: each packages op installs its own)."""
    return run_context.current().package_batches.get(host.name)


def policy_guard() -> list:
    """Shell put before the transaction's `apt-get install`: corral's policy-rc.d, only where the node
    has none of its own, removed however the command ends (a trap; a signal ends it)."""
    remove = cmd("rm", "-f", POLICY).get_raw_value()
    return [Raw("if [ ! -e"), POLICY, Raw("]; then"), "printf", "%s", POLICY_TEXT, Raw(">"), POLICY, AND,
            "chmod", "755", POLICY, AND, "trap", remove, "EXIT", AND, "trap", "exit 1", "HUP", "INT", "TERM",
            Raw("; fi;")]


@operation()
def install_together(want: Want, books: Batch):
    from corral.deploy.operations import _missing, apt_install  # operations imports this module
    # the snapshot must cover the names themselves: one read before a later deploy registered its packages for
    # the run (a component declared as data does, render/resources.py) would not know them, and reinstall them
    snap = snapshot(Want(paths=want.paths, packages=tuple(books.wanted)))
    missing = _missing(books.wanted, snap.packages)
    books.done = set(books.wanted)  # installed now, or before this run
    stale = (snap.files.get(POLICY) or {}).get("sha256") == POLICY_SHA  # left by a transaction killed hard
    if stale:
        yield cmd("rm", "-f", POLICY)
    if not missing:
        if not stale:
            host.noop(f"{len(books.wanted)} packages installed" if books.wanted else "no packages to install")
        return
    annotate(disruption="none", diff="install (services start later, once configured):\n"
                                     + "".join(f"+ {n}\n" for n in missing))
    yield from apt_install(missing, snap.apt_lists_age_s, guard=policy_guard())


@deploy("packages")
def package_batch() -> None:
    books = run_context.current().package_batches[host.name] = Batch()  # the later deploys fill it
    install_together(name="packages of the node's roles, in one transaction", want=WANT, books=books)
