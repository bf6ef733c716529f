"""Issue 34's acceptance, as a new user would try it: DeepOps' own config.example (tests/fixtures/deepops/example:
NFS /home and /sw, slurm_allow_ssh_user, an exact driver version, enroot/pyxis, Lmod/sm_prefix, a container
registry) through `corral import deepops`, `corral spec check` and `corral spec show --json`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from corral.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "deepops" / "example" / "config"


@pytest.fixture
def imported(tmp_path, capsys) -> tuple[Path, dict]:
    out = tmp_path / "cluster.yaml"
    assert main(["import", "deepops", str(EXAMPLE), "-o", str(out), "--json"]) == 0
    return out, json.loads(capsys.readouterr().out)


def test_imports_into_a_spec_that_passes_check_and_shows_what_was_carried(imported, capsys):
    spec, _ = imported
    assert main(["spec", "check", "-f", str(spec)]) == 0
    capsys.readouterr()
    assert main(["spec", "show", "-f", str(spec), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    exports = {e["path"]: e for e in data["storage"]["exports"]}
    mounts = {m["path"]: m for m in data["storage"]["mounts"]}
    assert set(exports) == set(mounts) == {"/home", "/sw"}
    for path in ("/home", "/sw"):  # DeepOps' *(rw,sync,no_root_squash), changed on purpose
        assert exports[path]["options"] == ["rw", "sync", "root_squash"] and exports[path]["clients"] == "cluster"
        assert not exports[path]["allow_root_equivalent"]
        assert (mounts[path]["export"], mounts[path]["server"], mounts[path]["options"]) == (path, None,
                                                                                          ["async", "vers=3"])
        assert mounts[path]["roles"] == ["compute"]  # nfs_client_group: slurm-master[1:],slurm-node
    nodes = {n["name"]: n["roles"] for n in data["nodes"]}
    assert "nfs" in nodes["login01"] and nodes["gpu01"] == ["compute"]
    assert data["identity"]["pam_slurm_adopt"] is True and data["identity"]["adopt_exempt_users"] == ["ops"]
    driver = data["nvidia"]["driver"]
    assert (driver["version"], driver["source"], driver["kernel_modules"]) == ("580.126.20", "distribution",
                                                                               "proprietary")
    enroot, pyxis = data["nvidia"]["enroot"], data["nvidia"]["pyxis"]
    assert enroot["version"] and enroot["cache_path"] == "/var/lib/enroot-cache/user-$(id -u)"
    assert enroot["settings"]["ENROOT_MOUNT_HOME"] == "y" and pyxis["version"]
    assert [(u["name"], u["uid"]) for u in data["users"]] == [("nvidia", 10007)]


def test_the_report_is_grouped_with_each_place(imported):
    _, report = imported
    assert report["ok"] and {"mapped", "changed_on_purpose", "not_carried"} <= set(report)
    items = report["mapped"] + report["changed_on_purpose"] + report["not_carried"]
    assert all(set(i) == {"group", "where", "subject", "text", "key"} for i in items)
    placed = [i for i in items if re.fullmatch(r"(inventory|(group|host)_vars/[\w./-]+):\d+", i["where"])]
    assert len(placed) >= 0.9 * len(items)  # the rest: whole files, or about the inventory as a whole

    def find(group: str, subject: str) -> dict:
        [item] = [i for i in report[group] if i["subject"] == subject]
        return item
    assert find("mapped", "slurm_allow_ssh_user")["key"] == "identity.adopt_exempt_users"
    assert find("mapped", "chrony_install")["where"] == "group_vars/all.yml:34"
    home = [i for i in report["changed_on_purpose"] if i["subject"] == "nfs_exports[0]"]
    assert any("root_squash instead" in i["text"] for i in home) and home[0]["where"] == "group_vars/slurm-cluster.yml:78"
    for name in ("slurm_install_lmod", "sm_prefix"):  # what software: gives, pointed to (not carried over)
        assert find("not_carried", name)["text"].startswith("software: gives Lmod")
    for name in ("slurm_enable_container_registry", "docker_registry_mirrors", "standalone_container_registry_port"):
        assert "container-registry" in find("not_carried", name)["text"]


def test_the_text_report_lists_the_groups_in_file_order(tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    assert main(["import", "deepops", str(EXAMPLE), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    head = text.splitlines()[0]
    assert re.fullmatch(rf"wrote {re.escape(str(out))}: \d+ mapped, \d+ changed on purpose, \d+ not carried", head)
    assert text.index("\nmapped (") < text.index("\nchanged on purpose (") < text.index("\nnot carried (")
    assert "  group_vars/all.yml:100: users — carried to users" in text  # no ":100:" emoji
    lines = [line for line in text.splitlines() if line.startswith("  group_vars/all.yml:")]
    numbers = [int(line.split(":")[1]) for line in lines[:5]]
    assert numbers == sorted(numbers)
