"""A bundle's serial (the build time in seconds, inside the signed manifest) against the newest this state dir
has used: an older signed bundle would downgrade the nodes (every signature of it still checks), so it is
refused unless accepted on purpose (`corral bundle use FILE --allow-downgrade`). The newest serial used is
kept in the state dir (bundle-serial.json) and only ever raised, except by that command."""

from __future__ import annotations

import json
import os
from email.utils import formatdate
from pathlib import Path

from corral.errors import CorralError

STATE = "bundle-serial.json"


def remembered(state_dir: Path) -> int:
    try:
        value = json.loads((Path(state_dir) / STATE).read_text()).get("serial", 0)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, AttributeError) as e:  # a damaged record refuses, rather than forgets, the floor
        raise CorralError(f"{Path(state_dir) / STATE} cannot be read ({e})",
                          fix="restore it from a backup, or run `corral bundle use FILE --allow-downgrade` to record "
                              "the bundle in use again") from None
    return value if isinstance(value, int) else 0


def _when(serial: int) -> str:
    return formatdate(serial, usegmt=True) if serial else "no serial (an older corral's)"


def check(state_dir: Path, serial: int, path: Path) -> None:
    """CorralError when `serial` is older than the newest bundle this state dir has used."""
    newest = remembered(state_dir)
    if serial < newest:
        raise CorralError(f"the bundle {path} is older than one this state dir has used already (built "
                          f"{_when(serial)}; the newest used was built {_when(newest)}): it would downgrade the nodes",
                          value=str(path), fix=f"use the newer bundle; to go back on purpose, run `corral bundle use "
                                               f"{path} -f SPEC --allow-downgrade` first")


def remember(state_dir: Path, serial: int, path: Path, *, downgrade: bool = False) -> int:
    """Record `serial` as the newest used (only raised, unless `downgrade`); the serial recorded before."""
    before = remembered(state_dir)
    if serial > before or (downgrade and serial != before):
        target = Path(state_dir) / STATE
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{STATE}.tmp")
        tmp.write_text(json.dumps({"serial": serial, "bundle": str(path)}) + "\n")
        os.replace(tmp, target)
    return before
