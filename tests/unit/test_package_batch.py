"""The node's package transaction (deploy/package_batch.py) sees every package it installs in the node's snapshot,
even one a later deploy registered for the run after the snapshot was first read (a component declared as data
registers its packages then): an installed package is never installed again."""

from __future__ import annotations

from types import SimpleNamespace

from pyinfra.context import ctx_host

from corral.deploy import nodestate, package_batch
from corral.deploy.nodestate import Snapshot, Want
from corral.engine import run_context


def test_a_package_registered_after_the_first_snapshot_is_seen_installed(monkeypatch):
    reads, said = [], []

    class Host(SimpleNamespace):
        def noop(self, text):
            said.append(text)

        def get_fact(self, fact, **wanted):  # the node has python3-prometheus-client installed
            reads.append(wanted["packages"])
            return Snapshot(packages={p: "1.0" for p in wanted["packages"] if p == "python3-prometheus-client"},
                            apt_lists_age_s=60)
    node = Host(name="ctl", data=SimpleNamespace())
    with run_context.active(run_context.RunContext()), ctx_host.use(node):
        nodestate.snapshot(package_batch.WANT)  # an early read (before the exporter was prepared)
        nodestate.register_for_run(Want(packages=("python3-prometheus-client",)))  # then the exporter registers
        books = package_batch.Batch(wanted=["python3-prometheus-client"])
        commands = list(package_batch.install_together._inner(want=package_batch.WANT, books=books))
    assert commands == [] and "python3-prometheus-client" in reads[-1], (commands, reads)
    assert said == ["1 packages installed"]
