"""The bundle's repository served from the control host while plan or apply runs (`packages.serve`): the
bundle verified against its expected signer, unpacked once (bundle/serve.py), served by the same server
as the virtual cluster's repository (virtual/repo.py), bound to that one address, and stopped again
however the run ends. Nothing is served without `packages.serve`."""

from __future__ import annotations

from contextlib import contextmanager

from corral.errors import CorralError, HostToolError


@contextmanager
def serving(cluster):
    p = cluster.spec.packages
    if p.source != "bundle" or not p.serve:
        yield None
        return
    from corral.bundle.serve import prepare
    from corral.virtual.repo import start_server, stop_server
    repo_dir, _ = prepare(cluster)
    address, _, port = p.serve.rpartition(":")
    try:
        pid = start_server(repo_dir, address, int(port), cluster.state_dir / "logs" / "bundle-http.log")
    except HostToolError as e:
        raise CorralError(f"cannot serve the bundle on {p.serve}: {e}", value=p.serve,
                          fix="packages.serve must be an address of this host the nodes reach, and a free port") \
            from None
    try:
        yield f"http://{p.serve}/"  # shell-ok: the URL served, for the caller; not a command
    finally:
        stop_server(pid)
