"""Every pyinfra internal corral uses (engine/pyinfra_seam.py), checked by name against the installed
pyinfra: an upgrade that renames, moves or reshapes one fails here, saying which. And no module
outside the seam imports pyinfra's internal modules."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State

import corral
from corral.engine import pyinfra_seam as seam

SRC = Path(corral.__file__).parent


def _params(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def _local_state():
    inventory = Inventory((["@local"], {}))
    return State(inventory, Config(), check_for_changes=False), next(iter(inventory))


def test_add_deploy_takes_state_deploy_and_host():
    from pyinfra.api.deploy import add_deploy
    assert seam.add_deploy is add_deploy and _params(add_deploy)[:2] == ["state", "deploy_func"]


def test_run_host_op_runs_one_op_on_one_host():
    from pyinfra.api.operations import run_host_op
    assert seam.run_host_op is run_host_op and _params(run_host_op) == ["state", "host", "op_hash"]


def test_disconnect_all_takes_the_state():
    from pyinfra.api.connect import disconnect_all
    assert seam.disconnect_all is disconnect_all and _params(disconnect_all) == ["state"]


def test_operation_meta_keeps_the_results_corral_reads():
    from pyinfra.api.operation import OperationMeta
    assert seam.OperationMeta is OperationMeta
    for name in ("did_change", "did_not_change", "did_succeed", "is_complete"):
        assert callable(getattr(OperationMeta, name)), name
    assert isinstance(inspect.getattr_static(OperationMeta, "will_change"), property)
    assert {"_maybe_is_change", "_commands", "_combined_output"} <= set(OperationMeta.__annotations__)
    assert _params(OperationMeta.set_complete)[1:4] == ["success", "commands", "combined_output"]
    meta = OperationMeta("hash", None)
    seam.set_planned_change(meta, True)
    assert meta.will_change is True  # plan's answer, read by `_if` of later ops
    seam.set_planned_change(meta, False)
    assert meta.will_change is False
    assert seam.op_output(meta) is None and seam.op_commands(meta) == []
    meta.set_complete(True, ["echo hi"], None)
    assert seam.op_commands(meta) == ["echo hi"] and meta.did_succeed()


def test_state_op_host_data_has_the_fields_corral_reads():
    from pyinfra.api.state import StateOperationHostData
    fields = set(getattr(StateOperationHostData, "__dataclass_fields__", {}))
    assert {"command_generator", "global_arguments", "operation_meta"} <= fields


def test_state_has_the_attributes_corral_uses():
    state, host = _local_state()
    for name in ("ops", "op_meta", "failed_hosts", "active_hosts", "activated_hosts", "pool"):
        assert hasattr(state, name), name
    assert callable(state.activate_host) and state.is_executing is False
    seam.mark_executing(state)
    assert state.is_executing is True
    seam.never_raise_failed_hosts(state)
    assert state.should_raise_failed_hosts(state) is False
    assert seam.op_names(state, "none") == [] and not seam.host_has_op(state, host, "none")


def test_host_has_the_attributes_corral_uses():
    _, host = _local_state()
    assert seam.op_hashes(host) == [] and isinstance(host.op_hash_order, list)
    for name in ("current_op_hash", "executing_op_hash", "connector", "connected"):
        assert hasattr(host, name), name
    assert seam.current_op_hash(host) is None
    assert seam.current_deploy_name(host) is None
    with host.deploy("slurm controller", None, None):
        assert seam.current_deploy_name(host) == "slurm controller"
    assert seam.current_deploy_name(host) is None
    seam.close_ssh_client(host)
    assert host.connected is False


def test_command_classes_keep_their_parts():
    from pyinfra.api.command import MaskString, QuoteString, StringCommand
    from pyinfra.api.hiddenvalue import HiddenValue
    assert (seam.MaskString, seam.QuoteString, seam.StringCommand, seam.HiddenValue) == (
        MaskString, QuoteString, StringCommand, HiddenValue)
    command = StringCommand("mysql", QuoteString(StringCommand("-p", MaskString("s3cret"))), HiddenValue("t0ken"))
    assert command.bits and QuoteString("x").obj == "x" and HiddenValue("v").raw_value == "v"
    assert isinstance(MaskString("m"), str) and command.get_raw_value().startswith("mysql")
    assert seam.secrets_in(command) == {"s3cret", "t0ken"}


@pytest.fixture
def no_pyinfra_context():
    """No host or state set when the test begins (an earlier test may have left pyinfra's set), and
    whatever was set put back after it."""
    from pyinfra.context import ctx_host, ctx_state
    before = ctx_host.get(), ctx_state.get()
    ctx_host.reset()
    ctx_state.reset()
    yield
    ctx_host.set(before[0])
    ctx_state.set(before[1])


def test_context_managers_set_the_greenlets_host_and_the_state(no_pyinfra_context):
    from pyinfra.context import ctx_host, ctx_state
    state, host = _local_state()
    assert seam.current_host() is None
    with seam.as_host(state, host):
        assert ctx_state.get() is state and ctx_host.get() is host and seam.current_host() is host
    assert ctx_host.get() is None and ctx_state.get() is None


def test_ssh_client_caches_can_be_cleared():
    from pyinfra.connectors.sshuserclient.client import get_host_keys, get_ssh_config
    assert callable(get_host_keys.cache.clear) and callable(get_ssh_config.cache.clear)
    seam.clear_ssh_caches()


def test_operations_keep_their_undecorated_generator():
    from pyinfra.operations import server
    assert inspect.isgeneratorfunction(seam.inner(server.shell)) and seam.inner(server.shell) is not server.shell


def test_global_argument_types_are_worked_out_once_with_the_same_answer():
    import typing

    from pyinfra.api import arguments
    seam.answer_lookups_once()
    assert arguments.all_global_arguments.answered_once
    assert arguments.all_global_arguments() == list(typing.get_type_hints(arguments.AllArguments).items())
    assert arguments.all_global_arguments() is not arguments.all_global_arguments()  # a fresh list, as before
    # pop_global_arguments looks the function up in its module each time: the copy is what it asks
    assert "all_global_arguments()" in inspect.getsource(arguments.pop_global_arguments)
    seam.answer_lookups_once()  # again: still the one copy
    assert arguments.all_global_arguments.answered_once


def test_connectors_are_found_from_the_one_reading_of_the_entry_points():
    import importlib.metadata as metadata

    from pyinfra.api import connectors

    from corral.engine.entry_points import entry_points
    seam.answer_lookups_once()
    assert connectors.entry_points is entry_points
    assert set(connectors.get_all_connectors()) == {e.name for e in metadata.entry_points(group="pyinfra.connectors")}
    assert {"ssh", "local"} <= set(connectors.get_execution_connectors())


def test_quick_host_data_answers_as_pyinfras_host_data():
    from pyinfra.api.host import HostData
    inventory = Inventory(([("n1", {"a": 1, "shared": "host"}), ("n2", {})], {"b": [2], "shared": "all"}),
                          controller=(["n1"], {"c": 3, "shared": "group"}))
    plain = Inventory(([("n1", {"a": 1, "shared": "host"}), ("n2", {})], {"b": [2], "shared": "all"}),
                      controller=(["n1"], {"c": 3, "shared": "group"}))
    seam.quick_host_data(inventory)
    for host, same in zip(inventory, plain):
        assert type(host.data).__mro__[1] is HostData and type(same.data) is HostData
        assert host.data.override_datas == {}  # the swap itself stored nothing as data
        for key in ("a", "b", "c", "shared", "missing", "_sudo", "name"):
            assert getattr(host.data, key, "absent") == getattr(same.data, key, "absent"), key
        host.data.shared = "override"  # pyinfra's own __setattr__: the override layer comes first
        same.data.shared = "override"
        assert host.data.shared == same.data.shared == "override" and host.data.dict() == same.data.dict()
        host.current_deploy_data = same.current_deploy_data = {"d": 4}  # a @deploy's data defaults come last
        assert host.data.d == same.data.d == 4
    first = next(iter(inventory))
    assert first.data.b == [2] and first.data.b is not first.data.b  # a copy each time, as pyinfra gives


CHECKED = {  # each internal the seam lists -> the test above that checks it
    "pyinfra.api.deploy.add_deploy": test_add_deploy_takes_state_deploy_and_host,
    "pyinfra.api.operations.run_host_op": test_run_host_op_runs_one_op_on_one_host,
    "pyinfra.api.connect.disconnect_all": test_disconnect_all_takes_the_state,
    "pyinfra.api.operation.OperationMeta": test_operation_meta_keeps_the_results_corral_reads,
    "pyinfra.api.state.StateOperationHostData": test_state_op_host_data_has_the_fields_corral_reads,
    "pyinfra.api.state.State": test_state_has_the_attributes_corral_uses,
    "pyinfra.api.host.Host": test_host_has_the_attributes_corral_uses,
    "pyinfra.api.command.StringCommand/QuoteString/MaskString": test_command_classes_keep_their_parts,
    "pyinfra.api.hiddenvalue.HiddenValue": test_command_classes_keep_their_parts,
    "pyinfra.context.ctx_host/ctx_state": test_context_managers_set_the_greenlets_host_and_the_state,
    "pyinfra.connectors.sshuserclient.client.get_host_keys/get_ssh_config": test_ssh_client_caches_can_be_cleared,
    "pyinfra operation._inner": test_operations_keep_their_undecorated_generator,
    "pyinfra.api.arguments.all_global_arguments": test_global_argument_types_are_worked_out_once_with_the_same_answer,
    "pyinfra.api.connectors.entry_points": test_connectors_are_found_from_the_one_reading_of_the_entry_points,
    "pyinfra.api.host.HostData": test_quick_host_data_answers_as_pyinfras_host_data,
}


def test_every_internal_the_seam_lists_is_checked_here():
    assert set(CHECKED) == set(seam.INTERNALS), "add a check for each internal added to the seam"


INTERNAL_IMPORT = re.compile(r"^\s*(from|import)\s+pyinfra\.(api\.\w+|context|connectors)\b", re.M)


@pytest.mark.parametrize("path", sorted(p for p in SRC.rglob("*.py") if p.name != "pyinfra_seam.py"),
                         ids=lambda p: str(p.relative_to(SRC)))
def test_only_the_seam_imports_pyinfra_internals(path):
    found = INTERNAL_IMPORT.findall(path.read_text())
    assert not found, f"{path.relative_to(SRC)} imports pyinfra internals {found}: use corral.engine.pyinfra_seam"


def test_the_seam_imports():
    importlib.reload(seam)
