"""The one `apt-get install` corral runs on a node, for operations (deploy/operations.py, the package
transaction) and rollout steps (the driver, package, Slurm and Kubernetes upgrades) alike: one set of
flags and a time bound.

  DEBIAN_FRONTEND=noninteractive timeout T apt-get install -y -q [--allow-downgrades] \
      --no-install-recommends -o Dpkg::Options::=--force-confold [--allow-change-held-packages] PACKAGES

No prompt (noninteractive, -y), the admin's edited config files kept (--force-confold: corral
manages its own files after the install), nothing apt merely recommends, and a hung dpkg or mirror
ends after `timeout_s` instead of holding a run (or a drained node) forever. `--allow-downgrades`
where exact versions are asked for (a pin, a rollback); `--allow-change-held-packages` where the
packages are held on purpose (Kubernetes' tools).
"""

from __future__ import annotations

import shlex

TIMEOUT_S = 1500  # under the 1800 s the rollouts give the whole command over SSH
# a node that lost power (or was killed) during an earlier install has dpkg "interrupted": apt refuses
# to install anything until the half-configured packages are finished (fast when none are)
CONFIGURE = "DEBIAN_FRONTEND=noninteractive dpkg --configure -a"


def install_script(packages: list[str] = (), *, downgrade: bool = False, held: bool = False, timeout_s: int = TIMEOUT_S,
            words: str = "") -> str:
    """The command: each of `packages` quoted (`name`, `name=version`, a .deb path); `words`: shell
    words appended as they are (a variable such as "$pkgs", already quoted paths)."""
    flags = (" --allow-downgrades" if downgrade else "") + " --no-install-recommends -o Dpkg::Options::=--force-confold" \
        + (" --allow-change-held-packages" if held else "")
    names = " ".join([shlex.quote(p) for p in packages] + ([words] if words else []))
    return f"DEBIAN_FRONTEND=noninteractive timeout {int(timeout_s)} apt-get install -y -q{flags} {names}"  # shell-ok: each package quoted above, `words` are the caller's shell
