"""The Slurm exporter answers whoever reaches its port: it runs as a user of its own with no way to
Slurm's or the BMCs' secrets, in systemd's sandbox. Pure: the unit and sysusers texts the deploy writes."""

from __future__ import annotations

import configparser

from corral import paths
from corral.render import power
from corral.render import slurm_exporter as X


def _service() -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None, empty_lines_in_values=False)
    parser.optionxform = str
    parser.read_string(X.unit("10.0.0.10:9341"))
    return dict(parser["Service"])


def test_the_exporter_runs_as_its_own_user_never_slurm_or_root():
    service = _service()
    assert service["User"] == X.USER == service["Group"] and X.USER not in ("root", "slurm")
    assert "SupplementaryGroups" not in service
    fields = X.SYSUSERS_TEXT.splitlines()[1].split()
    assert fields[:3] == ["u", X.USER, "-"] and fields[-2:] == ["/nonexistent", "/usr/sbin/nologin"]


def test_the_bmc_credentials_belong_to_slurm_alone(tmp_path):
    """What the exporter must not read: power's credential file, 0600 slurm:slurm."""
    from corral.render import resources as r
    from corral.spec.loader import load_text
    spec = ("name: lab\nnodes:\n  - {names: ctl1, addresses: [10.0.0.10], roles: [controller]}\n"
            "  - {names: cn1, addresses: [10.0.0.11], roles: [compute]}\npower:\n  enabled: true\n  bmc:\n"
            "    credentials_file: bmc.cred\n    nodes:\n      - {names: cn1, addresses: 10.9.0.11}\n")
    (tmp_path / "bmc.cred").write_text("admin:pw\n")
    c = load_text(spec, str(tmp_path / "cluster.yaml"))
    (f,) = [i for i in power.resources(c, c.nodes[0]) if isinstance(i, r.File) and i.path == paths.BMC_CREDENTIALS]
    assert (f.mode, f.user, f.group, f.secret) == ("600", "slurm", "slurm", True)
    assert paths.BMC_CREDENTIALS.startswith("/etc/")


def test_the_unit_is_sandboxed():
    service = _service()
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                       "PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes",
                       "ProtectKernelTunables": "yes", "ProtectControlGroups": "yes"}.items():
        assert service.get(key) == value, (key, service.get(key))
