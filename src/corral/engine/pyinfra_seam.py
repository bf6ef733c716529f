"""Every pyinfra internal corral relies on, in one place.

corral drives pyinfra through its Python API but needs more than the public names: its own op loop
(`run_host_op`, `add_deploy`), an op's private results (`OperationMeta._commands`, ...), the greenlet
context (`pyinfra.context`), the command classes' parts (to scrub secrets) and the SSH client's caches.
The rest of corral imports these from here, never from pyinfra's internal modules, and
`tests/unit/test_pyinfra_seam.py` checks each one still exists with the shape used here: a pyinfra
upgrade that moves one fails that one test, by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from copy import copy

from pyinfra.api.command import MaskString, QuoteString, StringCommand
from pyinfra.api.connect import disconnect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.hiddenvalue import HiddenValue
from pyinfra.api.host import HostData
from pyinfra.api.operation import OperationMeta
from pyinfra.api.operations import run_host_op
from pyinfra.context import ctx_host, ctx_state

__all__ = ["MaskString", "QuoteString", "StringCommand", "HiddenValue", "OperationMeta", "add_deploy",
           "disconnect_all", "run_host_op", "INTERNALS", "as_host", "current_host", "current_op_hash", "current_deploy_name",
           "op_data", "op_hashes", "op_names", "set_planned_change", "op_commands", "op_output",
           "never_raise_failed_hosts", "mark_executing", "close_ssh_client", "secrets_in",
           "clear_ssh_caches", "inner", "answer_lookups_once", "quick_host_data"]

# What corral uses, by name: (where, what it must be or have). The seam's test checks each.
INTERNALS: dict[str, str] = {
    "pyinfra.api.deploy.add_deploy": "add_deploy(state, deploy_func, host=host): one deploy for one host",
    "pyinfra.api.operations.run_host_op": "run_host_op(state, host, op_hash) -> bool: one op on one host",
    "pyinfra.api.connect.disconnect_all": "disconnect_all(state)",
    "pyinfra.api.operation.OperationMeta": "did_change/did_not_change/did_succeed/will_change/is_complete, "
                                           "private _maybe_is_change, _commands, _combined_output",
    "pyinfra.api.state.StateOperationHostData": "command_generator, global_arguments, operation_meta",
    "pyinfra.api.state.State": "ops[host][hash], op_meta[hash].names, failed_hosts, active_hosts, "
                               "activated_hosts, activate_host, is_executing, should_raise_failed_hosts, pool",
    "pyinfra.api.host.Host": "op_hash_order, current_op_hash, executing_op_hash, current_deploy_name, connector, "
                              "connected",
    "pyinfra.api.command.StringCommand/QuoteString/MaskString": "bits, obj, get_raw_value(); MaskString a str",
    "pyinfra.api.hiddenvalue.HiddenValue": "raw_value",
    "pyinfra.context.ctx_host/ctx_state": "use(), get(): the greenlet's host, the run's state",
    "pyinfra.connectors.sshuserclient.client.get_host_keys/get_ssh_config": "memoized: .cache.clear()",
    "pyinfra operation._inner": "the undecorated generator of an @operation (tests call it)",
    "pyinfra.api.arguments.all_global_arguments": "() -> [(name, type)]: get_type_hints(AllArguments), "
                                                  "called by pop_global_arguments for every op added",
    "pyinfra.api.connectors.entry_points": "importlib.metadata.entry_points, as the connectors module "
                                           "names it",
    "pyinfra.api.host.HostData": "datas (dicts, or callables giving dicts, searched in order), host; "
                                 "__getattr__ copies the first layer's value",
}


# --- context -----------------------------------------------------------------------------------

@contextmanager
def as_host(state, host) -> Iterator[None]:
    """Inside the block pyinfra's `host` (greenlet-local) and `state` are these: facts and ops can run."""
    with ctx_state.use(state), ctx_host.use(host):
        yield


@contextmanager
def as_state(state) -> Iterator[None]:
    with ctx_state.use(state):
        yield


@contextmanager
def on_host(host) -> Iterator[None]:
    with ctx_host.use(host):
        yield


def current_host():
    """The host whose op or fact runs in this greenlet, or None."""
    return ctx_host.get()


def current_op_hash(host) -> str | None:
    """The op `host` is generating commands for (prepare/plan) or executing (apply), if any."""
    return getattr(host, "current_op_hash", None) or getattr(host, "executing_op_hash", None)


def current_deploy_name(host) -> str | None:
    """The @deploy `host` is preparing ops of (pyinfra sets it around the deploy's body), if any."""
    return getattr(host, "current_deploy_name", None)


# --- a prepared State's ops ----------------------------------------------------------------------

def op_hashes(host) -> list[str]:
    """The host's ops in the order its deploys added them."""
    return host.op_hash_order


def op_data(state, host, op_hash: str):
    """pyinfra's StateOperationHostData: command_generator, global_arguments, operation_meta."""
    return state.ops[host][op_hash]


def host_has_op(state, host, op_hash: str) -> bool:
    return op_hash in state.ops.get(host, {})


def op_names(state, op_hash: str) -> list[str]:
    """The names pyinfra gave the op at this position (shared by every host's op there)."""
    meta = state.op_meta.get(op_hash)
    return sorted(meta.names) if meta and meta.names else []


def set_planned_change(meta: OperationMeta, changes: bool) -> None:
    """What plan found: `will_change` (and the `_if` of later ops) answer it without executing."""
    meta._maybe_is_change = changes


def op_commands(meta: OperationMeta) -> list:
    """The commands an executed op ran (pyinfra keeps them privately)."""
    return list(getattr(meta, "_commands", None) or [])


def op_output(meta: OperationMeta):
    """The executed op's combined output (stdout_lines, stderr_lines), or None."""
    return getattr(meta, "_combined_output", None) if meta.is_complete() else None


# --- a State's run -------------------------------------------------------------------------------

def never_raise_failed_hosts(state) -> None:
    """A failed host fails alone: pyinfra must not abort the run when one does."""
    state.should_raise_failed_hosts = lambda _state: False


def mark_executing(state) -> None:
    """pyinfra's own run_ops sets this before executing: facts and ops read it."""
    state.is_executing = True


def close_ssh_client(host) -> None:
    """pyinfra's SSH disconnect only drops its SFTP cache: close the SSH client too."""
    client = getattr(host.connector, "client", None)
    if client is not None:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - a failed close changes no result
            pass
    host.connected = False


def clear_ssh_caches() -> None:
    """pyinfra memoizes known_hosts and ssh_config per file name for the whole process."""
    from pyinfra.connectors.sshuserclient.client import get_host_keys, get_ssh_config

    get_host_keys.cache.clear()
    get_ssh_config.cache.clear()


# --- pyinfra's per-call lookups, answered once per process ----------------------------------------

def answer_lookups_once() -> None:
    """pyinfra works out the global arguments' types (`get_type_hints(AllArguments)`) for every op it
    adds (~450 times for the default spec: 0.19 s of a plan's profile) and reads every distribution's
    entry points for its connectors each time it builds an inventory. Neither answer can change
    while corral runs: each is taken once, and pyinfra asks the copy."""
    import pyinfra.api.arguments as arguments
    import pyinfra.api.connectors as connectors

    from corral.engine.entry_points import entry_points

    connectors.entry_points = entry_points
    if getattr(arguments.all_global_arguments, "answered_once", False):
        return
    types = tuple(arguments.all_global_arguments())

    def all_global_arguments() -> list[tuple[str, type]]:
        return list(types)

    all_global_arguments.answered_once = True  # type: ignore[attr-defined]
    arguments.all_global_arguments = all_global_arguments


class _QuickHostData(HostData):
    """pyinfra's HostData answering a missing key without a KeyError raised and caught in each of its
    six layers: pyinfra looks all 32 global arguments up in the host's data for every op it adds, and
    nearly all are missing. Same layers, same order, same copy."""

    def __getattr__(self, key: str):
        for data in self.datas:  # pyinfra's extract_callable_datas, without its generator
            if callable(data):
                data = data()
            if key in data:
                return copy(data[key])
        raise AttributeError(f"Host `{self.host}` has no data `{key}`")


def quick_host_data(inventory) -> None:
    """Every host of the inventory answers `host.data` lookups through `_QuickHostData`."""
    for host in inventory:
        if type(host.data) is HostData:  # (HostData's own __setattr__ would store __class__ as data)
            object.__setattr__(host.data, "__class__", _QuickHostData)


# --- commands --------------------------------------------------------------------------------------

def secrets_in(command: object) -> set[str]:
    """The raw values of the MaskString / HiddenValue parts of a (nested) command."""
    found: set[str] = set()
    stack = [command]
    while stack:
        item = stack.pop()
        if isinstance(item, QuoteString):
            stack.append(item.obj)
        elif isinstance(item, StringCommand):
            stack.extend(item.bits)
        elif isinstance(item, HiddenValue):
            if item.raw_value:
                found.add(str(item.raw_value))
        elif isinstance(item, MaskString) and str(item):
            found.add(str.__str__(item))
    return found


def inner(op):
    """An @operation's undecorated generator function (pyinfra 3 keeps it as `_inner`)."""
    return getattr(op, "_inner", op)
