"""Shared CLI pieces: spec resolution, consoles, JSON output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

import typer

from corral.errors import CorralError, UsageError

if TYPE_CHECKING:  # the spec's models are imported by the commands that load one, not by `corral --help`
    from rich.console import Console

    from corral.spec.cluster import Cluster


class LazyConsole:
    """A rich Console made on first use: rich costs ~15 ms to import, which `corral --help` and a command
    that fails before printing need not pay. It writes to sys.stdout/stderr as they are when it prints."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console
            self._console = Console(**self._options)
        return getattr(self._console, name)


out = LazyConsole(highlight=False, soft_wrap=True)
err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)

SpecOpt = typer.Option(None, "--spec", "-f", envvar="CORRAL_SPEC",
                       help="cluster.yaml to use (default: ./cluster.yaml, or $CORRAL_SPEC)")
JsonOpt = typer.Option(False, "--json", help="print one JSON object instead of text")
LimitOpt = typer.Option(None, "--limit", "-l", help="only these nodes (hostlist, e.g. 'gpu[01-04],ctl')")


def spec_path(spec: Optional[Path]) -> Path:
    return spec if spec is not None else Path("cluster.yaml")


def load_cluster(spec: Optional[Path]) -> Cluster:
    from corral.spec.loader import load
    return load(spec_path(spec))


def limit_names(cluster: Cluster, limit: Optional[str], option: str = "--limit") -> Optional[list[str]]:
    """The nodes a hostlist option names (None: all); a usage error for a bad or unknown name."""
    if not limit:
        return None
    from corral.spec.hosts import RangeError, expand_names
    try:
        names = expand_names(limit)
    except RangeError as exc:
        raise UsageError(f"{option}: {exc}", value=limit, fix="give a hostlist like 'gpu[01-04]'") from None
    known = [n.name for n in cluster.nodes]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"{option} names nodes that are not in the spec", value=",".join(unknown),
                         fix=node_hint(unknown, known))
    return names


def node_hint(unknown: list[str], known: list[str]) -> str:
    """The `fix` of an unknown node name: the spec's close names (did you mean), else every name."""
    close = {u: did_you_mean(u, known) for u in unknown}
    said = [f"{u}: did you mean {' or '.join(c)}?" for u, c in close.items() if c]
    if said:
        return "; ".join(said) + " (`corral spec show` lists the nodes)"
    return "choose from: " + ",".join(sorted(known))


def did_you_mean(value: str, choices: list[str], n: int = 3) -> list[str]:
    """The choices close to a mistyped value, closest first (ties: in name order)."""
    import difflib
    close = difflib.get_close_matches(value, choices, n=n)
    return sorted(close, key=lambda c: (-difflib.SequenceMatcher(None, value, c).ratio(), c))


def _fingerprint(value: str | None) -> str | None:
    """--fingerprint as gpg prints it or not (groups of four, spaces, either case): 40 hex digits, upper case."""
    if value is None:
        return None
    from corral.spec.types import fingerprint
    normal = fingerprint(value)
    if not re.fullmatch(r"[0-9A-F]{40}", normal):
        raise typer.BadParameter(f"{value!r} is not a key fingerprint (40 hex digits; spaces are ignored)")
    return normal


def fingerprint_option(help: str) -> Any:
    """A --fingerprint option: normalised (spaces dropped, upper case) and checked before the command runs."""
    return typer.Option(None, "--fingerprint", callback=_fingerprint, metavar="FINGERPRINT", help=help)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def _os_choice(value: str | None) -> str | None:
    """--os makes a new virtual cluster: a release the virtual cluster can build (Debian suites only)."""
    from corral.spec.releases import RELEASES, virtual_ok
    built = [n for n, r in RELEASES.items() if virtual_ok(r)]
    if value is not None and value not in built:
        why = " (the virtual cluster builds Debian nodes only)" if value in RELEASES else ""
        raise typer.BadParameter(f"{value!r}: one of {', '.join(built)}{why}")
    return value


OsOpt = typer.Option(None, "--os", callback=_os_choice, metavar="RELEASE",
                     help="the nodes' OS release (new cluster only): debian-13 (Slurm 24.11, the default) or "
                          "debian-12 (Slurm 22.05); the virtual cluster builds Debian nodes only")


def verdict(as_json: bool, work: Callable[[], dict], show: Callable[[dict], None]) -> None:
    """Run `work` and render its verdict object: text (`show`, then the error) or the JSON object, always
    (`ok: false` and the error on a usage or spec error too); exit 1 when it is not ok."""
    try:
        result = work()
    except CorralError as exc:  # refused before anything changed: exit 2 (1 for a node error), the object too
        if as_json:
            print_json({"ok": False, "error": str(exc)})
        raise
    if as_json:
        print_json(result)
    else:
        show(result)
        if result.get("error"):
            out.print(f"FAILED: {result['error']}", markup=False, style="red")
    if not result["ok"]:
        raise typer.Exit(1)
