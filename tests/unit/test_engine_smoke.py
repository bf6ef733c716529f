"""The smoke deploy prepares for every node (no SSH: preparing runs no command) and its template
renders per node. Applying it needs a virtual cluster (vcluster tests), never this host."""

from __future__ import annotations

from pyinfra.api import Config, State
from pyinfra.api.deploy import add_deploy
from pyinfra.api.util import get_template

from tests.smoke import deploy as smoke
from corral.engine.inventory import build_inventory
from corral.spec.loader import load_text

SPEC = """\
name: smoke
nodes:
  - names: ctl1
    addresses: [10.213.0.10]
    roles: [controller]
  - names: gpu[01-02]
    addresses: 10.213.0.[11-12]
    roles: [compute]
"""


def test_template_renders_per_node():
    text = get_template(str(smoke.TEMPLATE)).render(  # as files.template renders it
        node_name="gpu02", listen="10.213.0.12", memory_mb=smoke.memory_mb(2))
    assert "node gpu02" in text and "-l 10.213.0.12" in text and "-m 48" in text


def test_smoke_prepares_four_ops(tmp_path):
    cluster = load_text(SPEC, str(tmp_path / "cluster.yaml"))
    inventory = build_inventory(cluster)
    state = State(inventory, Config(), check_for_changes=False)
    for host in inventory:
        add_deploy(state, smoke.smoke, host=host)
    names = [sorted(state.op_meta[h].names)[0] for h in state.get_op_order()]
    assert names == ["smoke | memcached installed", "smoke | memcached configured",
                     "smoke | memcached running", "smoke | memcached restarted (configuration changed)"]
    restart = state.get_op_order()[-1]
    for host in inventory:
        assert state.ops[host][restart].global_arguments["_if"]
        assert host.data.corral_index == cluster.nodes.index(host.data.corral_node)
