"""The report of `corral import deepops`: every DeepOps group, host or variable the import read, in one
of three groups, each with the DeepOps file:line it came from:

- mapped: carried into cluster.yaml as DeepOps had it (the key it sets);
- changed on purpose: carried, but corral does it differently (NFS root squash, a Slurm version from
  packages instead of a source build, a sanitized name), and why;
- not carried: no cluster.yaml equivalent, or a value the import cannot carry, and what to do instead.

The text of each item is one line, `where: subject — text`; `--json` gives the fields."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

MAPPED, CHANGED, NOT_CARRIED = "mapped", "changed on purpose", "not carried"
GROUPS = (MAPPED, CHANGED, NOT_CARRIED)


@dataclass(frozen=True)
class Item:
    group: str  # one of GROUPS
    where: str  # "group_vars/all.yml:38" (relative to the config directory), files, or "" (none)
    subject: str  # a DeepOps variable, "[group]", a host, or the cluster.yaml key a note is about
    text: str
    key: str = ""  # the cluster.yaml key it sets (mapped, changed on purpose)

    def line(self) -> str:
        head = ": ".join(p for p in (self.where, self.subject) if p)
        return f"{head} — {self.text}"


@dataclass
class Report:
    """Items in the order the import found them."""

    items: list[Item] = field(default_factory=list)

    def add(self, group: str, where: str, subject: str, text: str, key: str = "") -> None:
        self.items.append(Item(group, where, subject, text, key))

    def note(self, where: str, subject: str, text: str) -> None:  # not carried
        self.add(NOT_CARRIED, where, subject, text)

    def change(self, where: str, subject: str, text: str, key: str) -> None:
        self.add(CHANGED, where, subject, text, key)

    def extend(self, other: Report) -> None:
        self.items += other.items

    def named(self, subject: str) -> bool:
        """Whether an item of any group is about `subject` already."""
        return any(i.subject == subject for i in self.items)

    def lines(self, group: str) -> list[str]:
        return [i.line() for i in self.items if i.group == group]

    def to_json(self) -> dict[str, list[dict[str, str]]]:
        return {g.replace(" ", "_"): [asdict(i) for i in self.items if i.group == g] for g in GROUPS}
