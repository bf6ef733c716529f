"""spec/models_images.py and spec/rules_images.py: `images:` typed and checked, every refusal located at
its key (file:line:col), nothing else needed: a registry name that is not host[:port], a registry node
that is not in the spec, ports used twice, the site's certificate without its key, and a credentials
file others can read (the rule that keeps NGC keys to root)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from corral.errors import SpecError
from corral.spec.loader import load_text

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller]}
      - {names: gpu01, addresses: [10.0.0.11], roles: [compute]}
    images:
    """)


def problems(tmp_path: Path, images: str) -> list[str]:
    text = BASE + textwrap.indent(textwrap.dedent(images), "  ")
    try:
        load_text(text, str(tmp_path / "cluster.yaml"))
    except SpecError as err:
        return [f"{p.where}: {p.message}" for p in err.problems]
    return []


def secret(tmp_path: Path, mode: int, name: str = "ngc") -> str:
    path = tmp_path / name
    path.write_text("$oauthtoken:nvapi-secret\n")
    os.chmod(path, mode)
    return name


def test_a_registry_with_a_cache_and_private_credentials_loads(tmp_path):
    name = secret(tmp_path, 0o600)
    cluster = load_text(BASE + textwrap.indent(textwrap.dedent(f"""\
        podman: true
        registry:
          node: ctl
          cache: [{{upstream: nvcr.io, port: 5001, credentials_file: {name}}}, {{upstream: "10.0.0.1:5000", port: 5002}}]
        """), "  "), str(tmp_path / "cluster.yaml"))
    r = cluster.spec.images.registry
    assert (r.port, r.storage, r.site, r.tls.cert_file) == (5000, "/var/lib/docker-registry", True, None)
    assert [c.upstream for c in r.cache] == ["nvcr.io", "10.0.0.1:5000"]


@pytest.mark.parametrize("bad", ["nvcr.io;id", "$(id)", "NVCR.io", "nvcr.io:0", "nvcr.io:99999", "https://nvcr.io",
                                 "nvcr.io/nvidia", "a b", "-x.io", "nvcr.io\n"])
def test_a_registry_name_that_is_not_host_port_is_located(tmp_path, bad):
    out = problems(tmp_path, f"registry: {{node: ctl, cache: [{{upstream: {bad!r}, port: 5001}}]}}\n")
    assert len(out) == 1 and "not a registry name host[:port]" in out[0], out
    assert out[0].startswith(str(tmp_path / "cluster.yaml") + ":6:"), out


def test_a_registry_node_not_in_the_spec_is_located(tmp_path):
    assert problems(tmp_path, "registry: {node: gpu09}\n") == [
        f"{tmp_path / 'cluster.yaml'}:6:20: not a node of the spec"]


def test_a_port_used_twice_is_located(tmp_path):
    out = problems(tmp_path, "registry: {node: ctl, metrics_port: 5050, cache: [{upstream: nvcr.io, port: 5051}]}\n")
    assert out == [f"{tmp_path / 'cluster.yaml'}:6:13: cache[0] metrics (metrics_port + 1) uses port 5051, as "
                   "cache[0].port does"], out


def test_neither_site_nor_cache_and_a_doubled_upstream(tmp_path):
    out = problems(tmp_path, "registry: {node: ctl, site: false}\n")
    assert len(out) == 1 and "neither the site registry nor a cache" in out[0]
    out = problems(tmp_path, "registry: {node: ctl, cache: [{upstream: nvcr.io, port: 5001}, "
                             "{upstream: nvcr.io, port: 5002}]}\n")
    assert len(out) == 1 and "cached twice" in out[0]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_credentials_file_others_can_read_is_located(tmp_path, mode):
    name = secret(tmp_path, mode)
    out = problems(tmp_path, f"registry: {{node: ctl, cache: [{{upstream: nvcr.io, port: 5001, "
                             f"credentials_file: {name}}}]}}\n")
    assert len(out) == 1 and f"mode {mode:04o}: others than its owner may read it" in out[0], out
    assert out[0].startswith(f"{tmp_path / 'cluster.yaml'}:6:"), out


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_credentials_file_of_its_owner_alone_is_accepted(tmp_path, mode):
    name = secret(tmp_path, mode)
    assert problems(tmp_path, f"registry: {{node: ctl, cache: [{{upstream: nvcr.io, port: 5001, "
                              f"credentials_file: {name}}}]}}\n") == []


def test_a_missing_credentials_file_and_a_certificate_without_key(tmp_path):
    out = problems(tmp_path, "registry: {node: ctl, cache: [{upstream: nvcr.io, port: 5001, credentials_file: "
                             "nope}]}\n")
    assert len(out) == 1 and "no such file" in out[0], out
    out = problems(tmp_path, "registry: {node: ctl, tls: {cert_file: reg.pem}}\n")
    assert len(out) == 1 and "come together" in out[0], out


def test_the_site_key_must_be_private_too(tmp_path):
    (tmp_path / "reg.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    key = secret(tmp_path, 0o644, "reg.key")
    out = problems(tmp_path, f"registry: {{node: ctl, tls: {{cert_file: reg.pem, key_file: {key}}}}}\n")
    assert len(out) == 1 and "registry key" in out[0] and "mode 0644" in out[0], out


def test_kubernetes_clusters_get_no_images_yet(tmp_path):
    text = textwrap.dedent("""\
        name: lab
        scheduler: kubernetes
        nodes:
          - {names: cp1, addresses: [10.0.0.10], roles: [control-plane]}
          - {names: w1, addresses: [10.0.0.11], roles: [worker]}
        images: {podman: true}
        """)
    with pytest.raises(SpecError) as err:
        load_text(text, str(tmp_path / "cluster.yaml"))
    assert [f"{p.where}: {p.message}" for p in err.value.problems] == [
        f"{tmp_path / 'cluster.yaml'}:6:9: images: is deployed with Slurm's components only"]
