"""The one deploy for components declared as data (render/resources.py): gate once, then each resource in its
order, as the operations of deploy/operations.py under the same op names a hand-written deploy gave them (so
journals and plans read the same). Built per component by `deploy_for` (deploy/__init.py `deploy_of`)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy, operation

from corral.render import resources as r
from corral.deploy import operations
from corral.deploy.nodestate import Want, register_for_run, snapshot
from corral.engine.conditions import AnyChanged
from corral.engine.notes import annotate
from corral.engine.shell import cmd

_BUILT: dict[str, object] = {}


@operation()
def removed(unit: str, paths: tuple[str, ...], want: Want):
    """A daemon this node no longer runs (render/resources.py Removed): stopped and disabled, its files removed,
    systemd reloaded; nothing when none of its files is there."""
    files = snapshot(want).files
    there = [p for p in paths if files.get(p) is not None]
    if not there:
        host.noop(f"no {unit} here")
        return
    annotate(disruption=f"stop {unit}", diff=f"- {unit} (stopped, disabled)\n" + "".join(f"- {p}\n" for p in there))
    yield cmd("timeout", "90", "systemctl", "disable", "--now", "--quiet", unit)
    yield cmd("rm", "-rf", "--", *there)
    yield cmd("timeout", "60", "systemctl", "daemon-reload")


def apply(items, want: Want) -> None:
    """Each resource as its operation, in order."""
    from corral.deploy.adopt import absent
    written = {}
    for i in items:
        if isinstance(i, r.Packages):
            operations.packages(name=i.name, names=list(i.names), want=want, together=i.together)
        elif isinstance(i, r.Repository):
            from corral.deploy.nvidia_repo import cuda_repository
            if i.kind != "cuda":
                raise ValueError(f"no repository kind {i.kind!r}")
            cuda_repository(name=i.name, repo_url=i.url, want=want)
        elif isinstance(i, r.Key):
            from corral.deploy.apt_keys import pinned_key
            pinned_key(name=i.name, path=i.path, url=i.url, fingerprint=i.fingerprint, what=f"{i.vendor}'s apt key",
                       dearmor=i.dearmor, want=want)
        elif isinstance(i, r.Skip):
            operations.skip(name=i.name, reason=i.reason)
        elif isinstance(i, r.Directory):
            operations.directory(name=i.name or i.path, path=i.path, mode=i.mode, user=i.user, group=i.group,
                                 want=want)
        elif isinstance(i, r.File):
            content = i.content.make() if isinstance(i.content, r.Made) else i.content
            written[i.path] = operations.managed_file(name=i.name or i.path, path=i.path, content=content,
                                                      mode=i.mode, user=i.user, group=i.group, secret=i.secret,
                                                      disruption=i.disruption, want=want, validate=i.validate)
        elif isinstance(i, r.Absent):
            absent(name=i.name, path=i.path, want=want)
        elif isinstance(i, r.OnChange):
            operations.run_when_changed(name=i.name, description=i.description,
                                        _if=AnyChanged(*(written[p] for p in i.paths)),
                                        commands=[c if isinstance(c, str) else cmd(*c) for c in i.commands])
        elif isinstance(i, r.Service):
            if i.policy is not None:  # its drop-in (render/resources.expanded shows the same file)
                operations.restart_policy(name=i.policy_op or r.policy_name(i.unit), unit=i.unit, want=want,
                                          started_next=True, policy=i.policy)
            operations.service(name=i.name, unit=i.unit, want=want, wait=i.wait)
            if i.restart_on:
                operations.restart(name=i.restart, unit=i.unit, want=want, wait=i.restart_wait or i.wait,
                                   _if=AnyChanged(*(written[p] for p in i.restart_on)))
        elif isinstance(i, r.Restart):
            op = operations.restart if i.verb == "restart" else operations.reload
            op(name=i.name, unit=i.unit, want=want, wait=i.wait, _if=AnyChanged(*(written[p] for p in i.on)))
        elif isinstance(i, r.Removed):
            removed(name=i.name, unit=i.unit, paths=i.paths, want=want)
        else:
            raise TypeError(f"not a resource: {i!r}")


def deploy_for(component):
    """The pyinfra deploy of a component declared as data (one per component, built once)."""
    if component.name not in _BUILT:
        @deploy(component.name)
        def apply_resources() -> None:
            node, cluster = host.data.corral_node, host.data.corral_cluster
            if not component.applies(cluster, node):
                return
            items = component.resources(cluster, node)
            apply(items, register_for_run(Want(paths=r.paths(items), packages=r.packages(items),
                                               services=r.services(items))))
        _BUILT[component.name] = apply_resources
    return _BUILT[component.name]
