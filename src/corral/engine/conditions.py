"""`_if=` conditions the planner can evaluate without executing anything (pyinfra's own
`any_changed` is an opaque lambda: a plan could only say "if its condition holds at apply time")."""

from __future__ import annotations


class AnyChanged:
    """True when any of the given operations changed (apply) / will change (plan)."""

    def __init__(self, *metas) -> None:
        self.metas = metas

    def __call__(self) -> bool:
        return any(m.did_change() for m in self.metas)

    def planned(self) -> bool:
        return any(m.will_change for m in self.metas)
