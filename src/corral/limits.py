"""Limits on the size of what corral reads, in one place.

A small file must not make corral spend minutes or gigabytes: hostlists are counted before they are
expanded, files are measured before they are read, and YAML aliases are counted while composing.
Each limit can be raised (or lowered) with an environment variable holding a positive integer; it
is read at every check, so a changed variable takes effect at once.

  CORRAL_MAX_NODES          100000    nodes in one cluster.yaml, summed over every `nodes:` group
                                      (and names or addresses in one hostlist)
  CORRAL_MAX_SPEC_BYTES     10485760  size of cluster.yaml (10 MiB), checked before it is parsed; also
                                      the text its aliases may expand to
  CORRAL_MAX_YAML_VALUES    100000    values in one YAML file, an alias counting as everything it
                                      stands for (guards against "billion laughs")
  CORRAL_MAX_YAML_ALIASES   1000      aliases (`*name`) in one YAML file
  CORRAL_MAX_IMPORT_BYTES   10485760  `corral import deepops`: the inventory plus every group_vars/
                                      and host_vars/ file, together (10 MiB); also the text the
                                      aliases of one vars file may expand to
  CORRAL_MAX_IMPORT_HOSTS   100000    `corral import deepops`: hosts in the inventory, ranges such as
                                      gpu[0:999] counted before they are expanded; a host named on
                                      several lines counts once, but lines may name at most
                                      IMPORT_MENTIONS_PER_HOST times this many hosts in all
  CORRAL_MAX_IMPORT_GROUPS  1000      `corral import deepops`: groups in the inventory (group
                                      memberships resolved are bounded by the mentions limit too)

Hitting a limit is a located, one-line error that names the variable to raise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from corral.errors import UsageError

MIB = 1024 * 1024
IMPORT_MENTIONS_PER_HOST = 10  # a host is usually named in [all] and in one or two groups


@dataclass(frozen=True)
class Limits:
    max_nodes: int = 100_000
    max_spec_bytes: int = 10 * MIB
    max_yaml_values: int = 100_000
    max_yaml_aliases: int = 1000
    max_import_bytes: int = 10 * MIB
    max_import_hosts: int = 100_000
    max_import_groups: int = 1000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for f in fields(cls):
            text = env.get(env_var(f.name), "").strip()
            if not text:
                continue
            try:
                values[f.name] = int(text.replace("_", ""))
            except ValueError:
                values[f.name] = 0
            if values[f.name] <= 0:
                raise UsageError(f"{env_var(f.name)} must be a positive integer", value=text,
                                 fix=f"unset it to use the default ({getattr(cls, f.name)}) or give a number")
        return cls(**values)


DEFAULTS = Limits()


def env_var(name: str) -> str:
    """The environment variable that overrides limit `name`: max_nodes -> CORRAL_MAX_NODES."""
    return f"CORRAL_{name.upper()}"


def current() -> Limits:
    """The limits in force now (the defaults, overridden by the environment)."""
    return Limits.from_env()


def raise_hint(name: str) -> str:
    """The end of a fix: how to raise limit `name`."""
    return f"raise {env_var(name)} (now {getattr(current(), name)})"
