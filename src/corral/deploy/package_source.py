"""package source (every node, after proxy, before anything installs): with `packages.source: bundle` and
`packages.serve`, apt on the node reads the bundle's repository alone, served by the control host during
plan and apply (workflows/bundle_serve.py), its InRelease checked with the pinned key alone; apt's lists are
refreshed when the source changed. Otherwise corral's files go (if an earlier run wrote them) and the
node's own sources are read again. What each file holds: render/bundle_source.py."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from corral.deploy import operations
from corral.deploy.nodestate import Want, register
from corral.deploy.users import absent
from corral.render.bundle_source import KEYRING, LIST, ONLY, PARTS, only_source, source_list, url

WANT = register(Want(paths=(KEYRING, LIST, ONLY, PARTS)))
UPDATE = "timeout -k 5 300 apt-get update -q -o Acquire::Retries=2"


def bundle_key(cluster) -> bytes:
    """The keyring apt on the nodes checks the bundle's repository with (signed-by=): the pinned key alone,
    never the key file the bundle carries (bundle/trust.py; the bundle was verified before the run:
    workflows/bundle_serve.py)."""
    from corral.bundle.trust import keyring_for
    return keyring_for(cluster)


@deploy("package source")
def package_source() -> None:
    cluster = host.data.corral_cluster
    if url(cluster) is None:
        gone = absent(name="apt's own sources (no bundle source)", paths=[ONLY, LIST, KEYRING], want=WANT,
                      what="bundle source")
        operations.run_when_changed(name="apt lists refreshed (own sources back)", description="apt-get update",
                                    commands=[UPDATE], _if=gone.did_change)
        return
    key = operations.managed_file(name="the bundle's signing key", path=KEYRING, content=bundle_key(cluster), want=WANT)
    listed = operations.managed_file(name="the bundle's repository", path=LIST, content=source_list(cluster),
                                     want=WANT)
    operations.directory(name=f"{PARTS} (empty: no other source part)", path=PARTS, want=WANT)
    only = operations.managed_file(name="apt reads the bundle's source alone", path=ONLY, content=only_source(),
                                   want=WANT)
    operations.run_when_changed(name="apt lists refreshed (bundle source)", description="apt-get update",
                                commands=[UPDATE], _if=lambda: key.did_change() or listed.did_change()
                                or only.did_change())
