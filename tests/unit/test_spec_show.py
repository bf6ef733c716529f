"""`corral spec show`: every section of the spec, defaults filled in (JSON and text), and secrets only as the
paths of their files."""

from __future__ import annotations

import json
from pathlib import Path

from corral.cli.main import main
from corral.spec.models import ClusterSpec

BIND_PASSWORD = "bind-pw-Zq81rT7xWm"
BMC_LINE = "admin:bmc-pw-Ke55pLx0vA"
SPEC = """\
name: demo
nodes:
  - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting, nfs]}
  - names: gpu[01-02]
    addresses: 10.0.0.[11-12]
    roles: [compute]
    gpus: {model: h100, count: 8}
storage:
  exports: [{path: /srv/home}]
  mounts: [{path: /home, export: /srv/home}]
identity:
  adopt_exempt_users: [ops]
  ldap:
    uri: [ldaps://ldap.example.com]
    base: dc=example,dc=com
    bind_dn: cn=reader,dc=example,dc=com
    bind_password_file: secrets/ldap-bind
power:
  enabled: true
  bmc:
    credentials_file: secrets/bmc
    nodes: [{names: "gpu[01-02]", addresses: "10.1.0.[11-12]"}]
"""


def write_spec(tmp_path: Path) -> Path:
    (tmp_path / "secrets").mkdir()
    for name, text in (("ldap-bind", BIND_PASSWORD + "\n"), ("bmc", BMC_LINE + "\n")):
        (tmp_path / "secrets" / name).write_text(text)
        (tmp_path / "secrets" / name).chmod(0o600)
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC)
    return spec


def show(spec: Path, capsys, *extra: str) -> str:
    assert main(["spec", "show", "-f", str(spec), *extra]) == 0
    return capsys.readouterr().out


def test_json_has_every_top_level_section_of_the_model(tmp_path, capsys):
    data = json.loads(show(write_spec(tmp_path), capsys, "--json"))
    assert set(ClusterSpec.model_fields) <= set(data), set(ClusterSpec.model_fields) - set(data)
    assert data["storage"]["exports"][0]["path"] == "/srv/home"
    assert data["storage"]["mounts"][0] | {"path": "/home", "export": "/srv/home"} == data["storage"]["mounts"][0]
    assert data["identity"]["pam_slurm_adopt"] is True and data["identity"]["adopt_exempt_users"] == ["ops"]
    assert data["nvidia"]["dcgm"]["enabled"] is True  # defaults filled in
    assert data["rollout"]["max_failed"] == 1 and data["topology"] is None
    assert [n["name"] for n in data["nodes"]] == ["ctl", "gpu01", "gpu02"]  # groups expanded


def test_secrets_are_shown_as_paths_never_their_contents(tmp_path, capsys):
    spec = write_spec(tmp_path)
    for text in (show(spec, capsys, "--json"), show(spec, capsys)):
        assert BIND_PASSWORD not in text and "bmc-pw" not in text and "Ke55pLx0vA" not in text
        assert "secrets/ldap-bind" in text and "secrets/bmc" in text


def test_text_shows_the_same_sections(tmp_path, capsys):
    spec = write_spec(tmp_path)
    data = json.loads(show(spec, capsys, "--json"))
    text = show(spec, capsys)
    lines = text.splitlines()
    for key in data:
        assert any(line.startswith(f"{key}:") for line in lines) or key in ("name", "scheduler", "nodes"), key
    assert "demo (slurm): 3 nodes" in text and "gpu02" in text and "8 x h100" in text
    assert "    export: /srv/home" in lines  # sections as YAML under their name
    assert "  adopt_exempt_users:" in lines and "  - ops" in lines
    assert "topology: unset" in lines
