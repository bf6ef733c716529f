"""The images components (deploy/registry.py, render/registry.py, render/podman.py (podman as data),
workflows/render_images.py): what they install and where, the upstream password only inside the cache's
configuration file (a secret upload: masked, never a command's word), podman's mirror configuration
naming the cache, Prometheus's registry job, and `corral render` writing what the deploys install."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.components.views import declared
from corral.render.podman import registries_conf, storage_conf
from corral.render.prometheus import render_prometheus_yml
from corral.render.registry import config, instances
from corral import site_ca
from corral.virtual.defaults import default_spec
from tests.unit.test_render_slurm_files import KEY, _cluster, _state_secrets, assert_same, deploy_files, rendered

PASSWORD = "nvapi-Up-Pw-91xQ"


def images_spec(tmp_path: Path) -> str:
    creds = tmp_path / "ngc.cred"
    creds.write_text(f"$oauthtoken:{PASSWORD}\n")
    os.chmod(creds, 0o600)
    return default_spec(user_key=KEY) + ("images:\n  podman: true\n  registry:\n    node: ctl\n"
                                         "    cache: [{upstream: nvcr.io, port: 5001, credentials_file: ngc.cred}]\n")


def test_the_components_apply_where_declared(tmp_path):
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    where = {c.name: [n.name for n in cluster.nodes if c.applies(cluster, n)] for c in declared(cluster)}
    assert where["images registry"] == ["ctl"]
    assert where["ca trust"] == ["ctl", "gpu01", "gpu02", "login1"]
    assert where["podman"] == ["gpu01", "gpu02", "login1"]
    pkgs = {c.name: c.packages(cluster, cluster.node("ctl")) for c in declared(cluster)}
    assert set(pkgs["images registry"]) == {"docker-registry", "curl", "python3-cryptography", "munge"}
    assert not pkgs["podman"]
    assert set(next(c for c in declared(cluster) if c.name == "podman").packages(cluster, cluster.node("gpu01"))) == {
        "podman", "uidmap", "squashfs-tools"}


def test_registry_config_binds_the_cluster_address_with_tls_and_metrics(tmp_path):
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    site, cache = instances(cluster)
    text = config(cluster, site)
    addr = cluster.node("ctl").address
    for line in (f'  addr: "{addr}:5000"', '    certificate: "/etc/docker/registry/tls/registry.crt"',
                 '    key: "/etc/docker/registry/tls/registry.key"', f'    addr: "{addr}:5051"',
                 '    rootdirectory: "/var/lib/docker-registry/site"', "      enabled: true"):
        assert line in text.splitlines(), (line, text)
    assert "proxy:" not in text
    assert text.splitlines()[text.splitlines().index("  delete:") + 1] == "    enabled: false"  # no deletes (N5)
    cached = config(cluster, cache, ("$oauthtoken", PASSWORD)).splitlines()
    assert cached[cached.index("  delete:") + 1] == "    enabled: true"  # the cache's expiry
    assert cached[-4:] == ["proxy:", '  remoteurl: "https://nvcr.io"', '  username: "$oauthtoken"',
                           f'  password: "{PASSWORD}"']
    assert f'  addr: "{addr}:5001"' in cached and f'    addr: "{addr}:5052"' in cached


def test_podman_pulls_the_upstream_through_its_cache(tmp_path):
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    assert registries_conf(cluster).splitlines()[1:] == [
        "", "[[registry]]", 'prefix = "nvcr.io"', 'location = "nvcr.io"', "[[registry.mirror]]",
        'location = "ctl:5001"']


def test_podman_storage_is_vfs_only_on_the_virtual_cluster(tmp_path):
    """A virtual node's root is an overlayfs, where podman 5 refuses its overlay driver: vfs there; a real
    node's podman picks its own (overlay on its disk)."""
    virtual = storage_conf(_cluster(tmp_path, images_spec(tmp_path)))
    assert 'driver = "vfs"' in virtual.splitlines()
    (tmp_path / "real").mkdir()
    spec = images_spec(tmp_path / "real").replace("virtual:\n  subnet: 10.213.0.0/24\n", "")
    real = _cluster(tmp_path / "real", spec)
    assert real.spec.virtual is None and 'driver = ""' in storage_conf(real).splitlines()


def test_each_users_storage_is_under_roots_directory_made_by_the_prolog_and_at_login(tmp_path):
    """Security review 3, N6: no per-user path in /var/tmp, where another user could make it first."""
    import json
    from corral.deploy.jobhooks import config as hooks_config
    from corral.render.podman import PAM_PROFILE, USER_STORE, login_hook_files
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    assert 'rootless_storage_path = "/var/lib/corral-podman/$UID/storage"' in storage_conf(cluster).splitlines()
    assert "/var/tmp" not in storage_conf(cluster)
    dirs = json.loads(hooks_config(cluster, cluster.node("gpu01")))["user_dirs"]
    assert {"path": USER_STORE + "/{uid}", "clean": False, "shared": False} in dirs  # the prolog's, for a job's user
    files = login_hook_files(cluster)
    assert "optional\tpam_exec.so quiet /usr/local/sbin/corral-user-dirs" in files[PAM_PROFILE][0]
    assert files["/usr/local/sbin/corral-user-dirs"] == (
        "#!/bin/sh\n# Managed by corral: a user's node-local directories, made at login (pam_exec)\n"
        "exec /usr/bin/python3 -I /usr/local/lib/corral/userdirs.py\n", "755")


def test_prometheus_scrapes_each_registry_instance(tmp_path):
    cluster = _cluster(tmp_path, images_spec(tmp_path))
    text = render_prometheus_yml(cluster)
    addr = cluster.node("ctl").address
    job = text[text.index("  - job_name: registry"):].splitlines()[:6]
    assert job == ["  - job_name: registry", "    static_configs:", f'      - targets: ["{addr}:5051"]',
                   '        labels: {node: "ctl", registry: "site"}', f'      - targets: ["{addr}:5052"]',
                   '        labels: {node: "ctl", registry: "nvcr.io"}']


def test_the_certificate_is_made_once_and_again_when_the_address_changes(tmp_path):
    def registry_cert(name, address):
        return site_ca.server_cert(tmp_path, "lab", "registry", [name, address])
    first = registry_cert("ctl", "10.0.0.10")
    assert registry_cert("ctl", "10.0.0.10") == first
    assert registry_cert("ctl", "10.0.0.11") != first
    for name in ("ca.key", "registry.key"):
        assert (tmp_path / "secrets" / "ca" / name).stat().st_mode & 0o777 == 0o600
    assert site_ca.ca_pem(tmp_path, "lab").startswith("-----BEGIN CERTIFICATE-----")
    second = registry_cert("ctl", "10.0.0.11")
    for name in ("ca.key", "ca.pem"):  # the CA made again (same name, another key)
        (tmp_path / "secrets" / "ca" / name).unlink()
    assert registry_cert("ctl", "10.0.0.11") != second


@pytest.mark.parametrize("push_group", [None, "ml"])
def test_render_writes_what_the_deploys_install_and_no_password(tmp_path, monkeypatch, push_group):
    spec = images_spec(tmp_path)
    if push_group:  # the credential helper on podman's nodes, registries.conf naming it
        spec = spec.replace("    node: ctl\n", f"    node: ctl\n    push_group: {push_group}\n") + (
            f"groups: [{{name: {push_group}, gid: 3000}}]\n")
    cluster = _cluster(tmp_path, spec)
    _state_secrets(cluster)
    want, secret = deploy_files(cluster, monkeypatch)  # apply makes the CA and certificate; render copies them
    out = rendered(tmp_path / "out", cluster)
    ctl = out["ctl"]
    assert ctl["/etc/docker/registry/cache-5001.yml"].count(b"<secret:not-rendered:images.registry.cache.") == 2
    assert ("ctl", "/etc/docker/registry/cache-5001.yml") in secret
    assert ("ctl", "/etc/docker/registry/tls/registry.key") in secret
    for node, files in out.items():
        for path, data in files.items():
            assert PASSWORD.encode() not in data and b"PRIVATE KEY" not in data, (node, path)
    hidden = {k for k in secret if k[0] == "ctl" and k[1].startswith(("/etc/docker", "/etc/corral/registry-auth/"))}
    assert {("ctl", "/etc/corral/registry-auth/signer.key"), ("ctl", "/etc/corral/registry-auth/tls.key")} <= hidden
    assert b"<secret:not-rendered:" in ctl["/etc/corral/registry-auth/config.json"]
    for node, path in hidden:  # secret files: compared less their secrets
        want[node].pop(path), out[node].pop(path)
    assert_same(out, want, secret - hidden)
    assert out["gpu01"]["/usr/local/share/ca-certificates/corral-ca.crt"] == site_ca.ca_pem(
        cluster.state_dir, cluster.name).encode()
    assert ("/usr/local/bin/docker-credential-corral" in out["login1"]) == bool(push_group)
    assert (b"credential-helpers" in out["login1"]["/etc/containers/registries.conf.d/50-corral-registry.conf"]) == \
        bool(push_group)


@pytest.mark.parametrize("bad_mode", [0o644])
def test_an_apply_reads_the_credentials_only_from_a_private_file(tmp_path, bad_mode):
    from corral.errors import SpecError
    spec = images_spec(tmp_path)
    os.chmod(tmp_path / "ngc.cred", bad_mode)
    with pytest.raises(SpecError) as err:
        _cluster(tmp_path, spec)
    assert "others than its owner may read it" in str(err.value.problems[0].message)


def test_the_password_is_never_a_command_word_nor_in_a_diff(tmp_path, monkeypatch):
    """Every operation the registry deploy calls on a fresh registry node, run as plan and apply would: the
    upstream password reaches the node only as an uploaded file's content; no command, diff or reason
    holds it (the journal records those, plan prints them, `ps` shows commands)."""
    from types import SimpleNamespace

    from pyinfra.api.command import FileUploadCommand, StringCommand
    from pyinfra.context import ctx_host

    from corral.deploy import operations, registry
    from corral.deploy.nodestate import Snapshot
    from corral.engine import notes
    from tests.unit.test_operations_data import FakeHost

    cluster = _cluster(tmp_path, images_spec(tmp_path))
    node = cluster.node("ctl")
    calls = []
    for name in ("packages", "directory", "managed_file", "unit_dropin", "restart_policy", "service", "restart",
                 "run_when_changed"):
        # packages: names from the declaration alone (it calls an operation, run here only as pyinfra runs it)
        def record(*, _op=getattr(operations, name), **kwargs):
            calls.append((kwargs.pop("name"), _op, kwargs))
            return SimpleNamespace(did_change=lambda: True)
        monkeypatch.setattr(operations, name, record)
    with ctx_host.use(SimpleNamespace(data=SimpleNamespace(corral_node=node, corral_cluster=cluster), name="ctl",
                                      state=SimpleNamespace())):
        registry.registry._inner()
    monkeypatch.undo()
    uploads, words, said = [], [], []
    assert [n for n, op, _ in calls if op is operations.packages] == [
        "docker-registry (distribution), curl", "python3-cryptography, munge (the token server's)"]
    for name, op, kwargs in [c for c in calls if c[1] not in (operations.packages, operations.run_when_changed)]:
        kwargs.pop("_if", None)
        fake = FakeHost({"facts": {}})
        fake.snapshot, fake.name = Snapshot(apt_lists_age_s=60, container="none"), "ctl"
        fake.data.update(corral_node=node, corral_cluster=cluster)
        notes.take(fake.name, "case")
        with ctx_host.use(fake):
            for c in getattr(op, "_inner", op)(**kwargs):
                if isinstance(c, FileUploadCommand):
                    uploads.append(c.src.getvalue() if hasattr(c.src, "getvalue") else b"")
                else:
                    words.append(c.get_raw_value() if isinstance(c, StringCommand) else str(c))
        said.append(repr(notes.take(fake.name, "case")))
    assert any(PASSWORD.encode() in u for u in uploads), "the cache's configuration carries the password"
    assert words and not any(PASSWORD in w for w in words)
    assert not any(PASSWORD in s for s in said) and any("secret content differs" in s for s in said), said
