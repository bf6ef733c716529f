"""The Slurm REST API's component (render/slurm_rest.py, declared in components/slurm.py): its spec's located
errors, slurm.conf's JWT keys, the filter table (checked by nft itself where the host has it), what each node gets,
render's view of the key (never its bytes) and the audit's declaration. The live path: tests/vcluster/test_users.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from corral.components.views import by_name, declared, declared_daemons, slurm_conf
from corral.deploy.slurm import configs
from corral.errors import SpecError
from corral.render import resources as r
from corral.render import slurm_rest as rest
from corral.spec.loader import load_text

SPEC = (Path(__file__).resolve().parents[1] / "fixtures" / "audit" / "cluster.yaml").read_text()


def cluster(rest_yaml: str | None = "{}", extra: str = "", tmp_path: Path | None = None):
    text = SPEC if rest_yaml is None else SPEC.replace("slurm:\n", f"slurm:\n  rest: {rest_yaml}\n{extra}")
    return load_text(text, str((tmp_path or Path("/nonexistent")) / "cluster.yaml"))


def problem(text: str) -> str:
    with pytest.raises(SpecError) as err:
        cluster(text)
    return "\n".join(str(p) for p in err.value.problems)


def test_defaults_port_6820_clients_the_login_nodes():
    c = cluster()
    assert c.spec.slurm.rest.port == 6820 and c.spec.slurm.rest.clients == ["login"]
    assert rest.client_addresses(c) == ["10.213.0.13"]


@pytest.mark.parametrize("text, says", [
    ("{port: 6817}", "6817 is Slurm's own"),
    ("{port: 80}", "must be at least 1024"),
    ("{clients: []}", "at least 1 item"),
    ("{clients: [0.0.0.0/0]}", "whole internet or a public network"),
    ("{clients: [8.8.8.0/24]}", "whole internet or a public network"),
    ("{clients: [logins]}", "clients"),
    ("{clients: [\"10.0.0.0/8; rm -rf /\"]}", "clients"),
    ("{tokens: 3}", "tokens"),
])
def test_bad_values_get_a_located_error(text, says):
    msg = problem(text)
    assert says in msg and "cluster.yaml:" in msg, msg


def test_jwt_keys_in_slurm_extra_are_refused_while_rest_sets_them():
    msg = problem("{}\n  extra: {AuthAltTypes: auth/jwt}")
    assert "slurm.extra.AuthAltTypes: slurm.rest sets it" in msg
    plain = cluster(None)
    assert "AuthAltTypes" not in configs(plain, {}, (24, 11), None)["/etc/slurm/slurm.conf"]


def test_slurm_conf_names_the_jwt_plugin_and_the_key():
    text = configs(cluster(), {}, (24, 11), None)["/etc/slurm/slurm.conf"]
    assert "\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key\n" in text
    assert slurm_conf(cluster()) == {"AuthAltTypes": ("auth/jwt", "slurm jwt"),
                                     "AuthAltParameters": ("jwt_key=/etc/slurm/jwt_hs256.key", "slurm jwt")}


@pytest.mark.attack
def test_the_table_lets_only_the_clients_and_the_node_itself_reach_the_port():
    text = rest.nft_rules(cluster("{port: 7000, clients: [login, compute, 10.9.0.0/24, 'fd00::/64']}"))
    assert 'tcp dport 7000 iifname "lo" accept' in text
    assert "tcp dport 7000 ip saddr { 10.213.0.13, 10.213.0.11, 10.213.0.12, 10.9.0.0/24 } accept" in text
    assert "tcp dport 7000 ip6 saddr { fd00::/64 } accept" in text
    assert text.rstrip().endswith("tcp dport 7000 reject with tcp reset\n  }\n}")
    # loaded twice in a row (an apply after a restart): `delete table` of the one already there, then a new one
    assert text.index("table inet corral_slurmrestd\ndelete table inet corral_slurmrestd\n") > 0


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft not installed here")
def test_nft_itself_accepts_the_table(tmp_path):
    path = tmp_path / "t.nft"
    path.write_text(rest.nft_rules(cluster("{clients: [login, 'fd00::/64']}")))
    proc = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)
    if "Operation not permitted" in proc.stderr:
        pytest.skip("no CAP_NET_ADMIN here")
    assert proc.returncode == 0, proc.stderr


def test_each_node_gets_what_it_needs(tmp_path):
    c = cluster(tmp_path=tmp_path)
    jwt, api = by_name(c, "slurm jwt"), by_name(c, "slurm rest")
    names = [x.name for x in declared(c)]
    assert names.index("slurm jwt") < names.index("slurm controller") < names.index("slurm rest")
    nodes = {n.name: n for n in c.nodes}
    assert [i.names for i in jwt.resources(c, nodes["login1"])] == [("slurm-wlm-jwt-plugin",), ("curl",)]
    assert jwt.packages(c, nodes["gpu01"]) == {"slurm-wlm-jwt-plugin": "slurm.rest (AuthAltTypes)"}
    assert not api.applies(c, nodes["gpu01"]) and not api.applies(c, nodes["login1"])
    ctl = [*jwt.resources(c, nodes["ctl"]), *api.resources(c, nodes["ctl"])]
    files = r.files(ctl, tmp_path)
    assert set(files) == {rest.SYSUSERS, rest.KEY, rest.NFT, rest.DROPIN,
                          "/etc/systemd/system/slurmrestd.service.d/corral-restart.conf"}
    assert files[rest.KEY] == "<secret:not-rendered:state-dir/secrets/slurm-jwt-hs256.key>"
    key = next(i for i in ctl if isinstance(i, r.File) and i.path == rest.KEY)
    assert (key.mode, key.user, key.group, key.secret) == ("600", "slurm", "slurm", True)
    secret = Path(c.state_dir) / "secrets" / rest.SECRET
    assert not secret.exists(), "render made the key"
    made = key.content.make()  # apply makes it, once
    assert len(made) == 32 and secret.stat().st_mode & 0o777 == 0o600 and key.content.make() == made
    unit = files[rest.DROPIN]
    assert "User=corral-slurmrestd\n" in unit and "Environment=SLURM_JWT=daemon\n" in unit
    assert "ExecStart=\nExecStart=/usr/sbin/slurmrestd -a rest_auth/jwt 10.213.0.10:6820\n" in unit
    assert f"ExecStartPre=+/usr/sbin/nft -f {rest.NFT}\n" in unit and "NoNewPrivileges=yes" in unit


def test_unset_on_a_controller_removes_it_and_other_nodes_are_untouched(tmp_path):
    c = cluster(None, tmp_path=tmp_path)
    jwt, api = by_name(c, "slurm jwt"), by_name(c, "slurm rest")
    nodes = {n.name: n for n in c.nodes}
    assert not jwt.applies(c, nodes["gpu01"]) and not jwt.applies(c, nodes["login1"])
    (absent,) = jwt.resources(c, nodes["ctl"])
    assert isinstance(absent, r.Absent) and absent.path == rest.KEY
    (removed,) = api.resources(c, nodes["ctl"])
    assert isinstance(removed, r.Removed) and removed.unit == "slurmrestd"
    assert set(removed.paths) >= {rest.DROPIN, rest.NFT}
    assert jwt.packages(c, nodes["ctl"]) == {} and api.packages(c, nodes["ctl"]) == {}


def test_the_audit_expects_slurmrestd_as_its_own_user_on_the_controllers_only():
    c = cluster("{clients: [login]}")
    nodes = {n.name: n for n in c.nodes}
    (d,) = [d for d in declared_daemons(c, nodes["ctl"]) if d.unit == "slurmrestd.service"]
    assert d.user == "corral-slurmrestd" and not d.root
    assert [(l.port, l.on) for l in d.listens] == [(6820, "cluster")]
    assert not [d for d in declared_daemons(c, nodes["login1"]) if d.unit == "slurmrestd.service"]
