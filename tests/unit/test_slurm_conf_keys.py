"""slurm.conf parameters per Slurm release, read from each release's own slurm.conf(5)
(spec/slurm_man.py -> spec/slurm_conf_keys.py): the manual's keys are parsed as the man page nests them,
a `slurm.extra` key the target release does not know is a located error naming the releases that do,
and every key corral renders for a release is one that release's manual lists."""

from __future__ import annotations

import textwrap

import pytest

from corral.errors import SpecError
from corral.render import NodeHW, render_slurm_conf
from corral.spec.loader import load_text
from corral.spec.slurm_conf_keys import RELEASES
from corral.spec.slurm_keys import release_keys, releases_knowing
from corral.spec.slurm_man import keys, module, parse

MAN = textwrap.dedent(r"""
    .SH "PARAMETERS"
    .TP
    \fBAccountingStorageParameters\fR
    Options for the storage plugin:
    .RS
    .TP 2
    \fBSSL_CERT\fR
    a value, not a key
    .RE
    .TP
    \fBAuthType\fR
    The authentication method.
    .SH "PARTITION CONFIGURATION"
    .TP
    \fBMaxNodes\fR
    .TP
    \fBAuthType\fR
    .SH "NODE CONFIGURATION"
    .TP
    \fBNodeName\fR
    """)


def test_the_manual_is_read_as_it_nests_its_entries():
    assert parse(MAN) == {"PARAMETERS": ["AccountingStorageParameters", "AuthType"],
                          "PARTITION CONFIGURATION": ["MaxNodes", "AuthType"], "NODE CONFIGURATION": ["NodeName"]}
    found = keys(MAN)
    assert found == {"global": ["AccountingStorageParameters", "AuthType"], "partition": ["AuthType", "MaxNodes"],
                     "node": ["NodeName"]}
    namespace: dict = {}
    exec(module({"24.11": ("slurm-client 24.11.5-4+deb13u1", found)}), namespace)  # the generated module loads
    assert namespace["RELEASES"]["24.11"]["global"].split() == found["global"]


def test_the_releases_read_and_what_changed_between_them():
    assert sorted(RELEASES) == ["21.08", "22.05", "23.11", "24.11", "26.05"]  # 21.08, 23.11: Ubuntu 22.04, 24.04
    for major, r in RELEASES.items():
        assert r["source"].startswith(f"slurm-client {major}.")
    assert "jobcontainertype" in release_keys("24.11", "global") and "jobcontainertype" not in release_keys("26.05", "global")
    assert "namespacetype" in release_keys("26.05", "global")  # job_container/tmpfs became namespace/tmpfs in 25.11
    assert releases_knowing("ControlMachine", "global") == ["21.08", "22.05", "23.11", "24.11"]
    assert "ubuntu" in RELEASES["21.08"]["source"] and "ubuntu" in RELEASES["23.11"]["source"]
    assert release_keys("23.02", "global") is None  # not read: the hand list alone (spec/slurm_keys.py)


def _virtual(os_name: str, version: str | None, extra: str) -> str:
    pin = f"  version: \"{version}\"\n" if version else ""
    return (f"name: lab\nvirtual: {{subnet: 10.213.99.0/24}}\nnodes:\n"
            f"  - {{names: ctl, addresses: [10.213.99.10], roles: [controller], os: {os_name}}}\n"
            f"  - {{names: gpu01, addresses: [10.213.99.11], roles: [compute], os: {os_name}, "
            f"gpus: {{model: h100, count: 4}}}}\n"
            + (f"slurm:\n{pin}" + (f"  extra: {{{extra}}}\n" if extra else "") if pin or extra else ""))


def test_a_key_the_target_release_does_not_know_is_a_located_error():
    with pytest.raises(SpecError) as e:
        load_text(_virtual("debian-13", "26.05", "GetEnvTimeout: 5"), "cluster.yaml")
    assert "cluster.yaml:8:" in str(e.value)  # the key's own line
    assert ("slurm.extra.GetEnvTimeout: Slurm 26.05's slurm.conf(5) has no GetEnvTimeout (it is a parameter "
            "of Slurm 21.08, 22.05, 23.11, 24.11)") in str(e.value)
    load_text(_virtual("debian-13", "24.11", "GetEnvTimeout: 5"), "cluster.yaml")  # 24.11 has it
    load_text(_virtual("debian-13", "26.05", "HealthCheckTimeout: 60"), "cluster.yaml")
    with pytest.raises(SpecError, match=r"Slurm 24\.11's slurm.conf\(5\) has no HealthCheckTimeout \(it is a "
                                        r"parameter of Slurm 26\.05\)"):
        load_text(_virtual("debian-13", None, "HealthCheckTimeout: 60"), "cluster.yaml")  # trixie: 24.11
    with pytest.raises(SpecError, match=r"slurm.extra.NamespaceType: corral renders this key .*use the spec key "
                                        r"slurm.clean_jobs"):  # namespace/tmpfs from 25.11 (render/job_container.py)
        load_text(_virtual("debian-13", "26.05", "NamespaceType: namespace/linux"), "cluster.yaml")
    with pytest.raises(SpecError, match=r"Slurm 22\.05's slurm.conf\(5\) has no DataParserParameters"):
        load_text(_virtual("debian-12", None, "DataParserParameters: v0.0.41"), "cluster.yaml")


@pytest.mark.parametrize("major", sorted(RELEASES))
def test_every_key_corral_renders_is_in_that_releases_manual(major):
    text = _virtual("debian-13" if major != "22.05" else "debian-12", major if major == "26.05" else None, "")
    text = text.replace("roles: [controller]", "roles: [controller, accounting]")
    cluster = load_text(text, "cluster.yaml")
    hw = {n.name: NodeHW(64, 2, 16, 2, 512000) for n in cluster.with_role("compute")}
    conf = render_slurm_conf(cluster, hw, version=tuple(int(x) for x in major.split(".")))
    flat, part = set(), set()
    for line in conf.splitlines():
        if line.strip() and not line.startswith("#"):
            words = {w.split("=", 1)[0].lower() for w in line.split() if "=" in w}
            (part if line.startswith("PartitionName") else flat).update(words)
    flat -= {"nodename", "partitionname"} | set(release_keys(major, "node"))
    assert flat <= set(release_keys(major, "global")), sorted(flat - set(release_keys(major, "global")))
    assert part - {"partitionname"} <= set(release_keys(major, "partition"))
