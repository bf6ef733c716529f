"""The group graph of an Ansible inventory, indexed once: members, role members, and which groups a
host is in. Each lookup is linear or better in the inventory, so a whole import stays near linear in
its hosts (every host asking "which groups contain me?" used to walk every group)."""

from __future__ import annotations

from typing import Any

from corral import limits
from corral.errors import Problem, SpecError


def canon(group: str) -> str:  # DeepOps and Kubespray spell groups both ways: kube_node, kube-node
    return group.replace("_", "-")


class GroupGraph:
    """Mixin for Inventory: needs `groups` ({name: Entry with .hosts and .children}) and `_cache` (a
    dict, emptied whenever the groups change)."""

    groups: dict[str, Any]
    _cache: dict[Any, Any]

    def _cached(self, key: Any, make: Any) -> Any:  # the indexes are built once, after parsing
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def members(self, name: str) -> list[str]:  # its hosts, then its children's (depth first), once each
        out: dict[str, None] = {}
        stack, seen = [name], set()
        while stack:
            g = stack.pop()
            if g in seen or g not in self.groups:
                continue
            seen.add(g)
            out.update(dict.fromkeys(self.groups[g].hosts))
            stack += reversed(self.groups[g].children)
        return list(out)

    def role_members(self, canonical: str) -> list[str]:  # kube_node and kube-node alike
        return self._cached(("role", canonical), lambda: list(dict.fromkeys(
            h for g in self.groups if canon(g) == canonical for h in self.members(g))))

    def in_role(self, host: str, canonical: str) -> bool:
        return host in self._cached(("in-role", canonical), lambda: set(self.role_members(canonical)))

    def _ancestors(self, group: str) -> frozenset[str]:  # the groups that have `group` as a member
        def make() -> frozenset[str]:
            parents = self._cached("parents", lambda: _parents(self.groups))
            found, todo = {group}, [group]
            while todo:
                for p in parents.get(todo.pop(), ()):
                    if p not in found:
                        found.add(p)
                        todo.append(p)
            return frozenset(found)
        return self._cached(("ancestors", group), make)

    def has_members(self, name: str) -> bool:
        return name in self._cached("non-empty", lambda: set().union(
            *(self._ancestors(g) for g, e in self.groups.items() if e.hosts)))

    def host_groups(self, host: str) -> list[str]:  # the groups it is in (not 'all'), in inventory order
        direct = self._cached("direct", lambda: _direct_groups(self.groups)).get(host, ())

        def make() -> list[str]:
            within = set().union(*(self._ancestors(g) for g in direct)) - {"all"}
            self._work(len(within))
            order = self._cached("order", lambda: {g: i for i, g in enumerate(self.groups)})
            return sorted(within, key=order.__getitem__)
        return self._cached(("host-groups", direct), make)

    def _work(self, n: int) -> None:
        """Bound the group memberships resolved: hosts in many different, deeply nested groups."""
        self._cache["work"] = self._cache.get("work", 0) + n
        limit = limits.IMPORT_MENTIONS_PER_HOST * limits.current().max_import_hosts
        if self._cache["work"] > limit:
            where = str(getattr(self, "path", "inventory"))
            raise SpecError([Problem(where, "the inventory's groups nest too intricately: more than "
                                     f"{limit} group memberships to resolve", None,
                                     "nest fewer [group:children] levels or "
                                     + limits.raise_hint("max_import_hosts"))])


def _parents(groups: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g, e in groups.items():
        for c in dict.fromkeys(e.children):
            out.setdefault(c, []).append(g)
    return out


def _direct_groups(groups: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for g, e in groups.items():
        for h in dict.fromkeys(e.hosts):
            out.setdefault(h, []).append(g)
    return {h: tuple(gs) for h, gs in out.items()}
