"""The one place corral writes an `apt-get install` for a node, for operations (deploy/operations.py)
and rollout steps (the driver, Slurm, Kubernetes and package upgrades, the release .debs) alike:

  DEBIAN_FRONTEND=noninteractive [timeout T] apt-get install -y -q --no-install-recommends \
      [--allow-downgrades] [-o Dpkg::Options::=--force-confold] [--allow-change-held-packages] PACKAGES

No prompt, ever (noninteractive, -y). What apt merely recommends is never installed, on every path:
the deploys, the rollouts, the air-gap bundle's resolution (bundle/resolve.py) and the virtual image
(virtual/image.py) all take a package with its dependencies only, so a node's package set does not
depend on the route it took (a deploy, a rollout, a bundle); the package upgrade's simulation
(facts/apt_upgrades.py) plans under the same policy. There is no flag to ask otherwise: a package a
node needs is named (its component declares it), not pulled in as a recommendation.
tests/unit/test_apt_recommends.py fails any `apt-get install` corral writes without it.

Each caller asks for the flags its install needs: the admin's edited config files kept (`confold`)
where corral manages its own files after the install; `downgrade` where exact versions are asked for
(a pin, a rollback); `held` where the packages are held on purpose (Kubernetes' tools); `timeout_s`
where a hung dpkg or mirror must not hold a drained node. One writer, so a flag is spelled (and
ordered) one way.
"""

from __future__ import annotations

import shlex

# a node that lost power (or was killed) during an earlier install has dpkg "interrupted": apt refuses
# to install anything until the half-configured packages are finished (fast when none are)
CONFIGURE = "DEBIAN_FRONTEND=noninteractive dpkg --configure -a"
CONFOLD = "-o Dpkg::Options::=--force-confold"
NO_RECOMMENDS = "--no-install-recommends"  # every path's policy (above)


def install_script(packages: list[str] | tuple[str, ...] = (), *, downgrade: bool = False, confold: bool = False,
                   held: bool = False, timeout_s: int | None = None, words: str = "") -> str:
    """The command: each of `packages` quoted (`name`, `name=version`, `name=version-*`); `words`: shell
    words appended as they are (a variable such as "$pkgs", already quoted paths)."""
    flags = "".join(flag for on, flag in ((downgrade, " --allow-downgrades"), (confold, f" {CONFOLD}"),
                                          (held, " --allow-change-held-packages")) if on)
    bound = f"timeout {int(timeout_s)} " if timeout_s else ""
    names = " ".join([shlex.quote(p) for p in packages] + ([words] if words else []))
    return f"DEBIAN_FRONTEND=noninteractive {bound}apt-get install -y -q {NO_RECOMMENDS}{flags} {names}"  # shell-ok: each package quoted above, `words` are the caller's shell
