"""The Slurm exporter answers whoever reaches its port: it runs as a user of its own with no way to
Slurm's or the BMCs' secrets, in systemd's sandbox. Pure: the unit and sysusers texts the deploy writes."""

from __future__ import annotations

import configparser

from corral import paths
from corral.deploy import power
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


def test_the_bmc_credentials_belong_to_slurm_alone():
    """What the exporter must not read: power's credential file, 0600 slurm:slurm."""
    import inspect
    source = inspect.getsource(power.power)
    assert 'mode="600", user="slurm", group="slurm", secret=True' in source and "BMC_CREDENTIALS" in source
    assert paths.BMC_CREDENTIALS.startswith("/etc/")


def test_the_unit_is_sandboxed():
    service = _service()
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                       "PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes",
                       "ProtectKernelTunables": "yes", "ProtectControlGroups": "yes"}.items():
        assert service.get(key) == value, (key, service.get(key))
