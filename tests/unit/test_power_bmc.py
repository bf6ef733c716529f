"""The emulated Redfish BMC (virtual/bmc.py) on 127.0.0.1 with a fake node starter, driven by corral's
Redfish client and power programs (node/power_redfish.py, node/power.py) and by sushy (a Redfish client
of its own: the emulator speaks Redfish, not only what corral's client expects). Real HTTP; power
on/off, wrong credentials, a BMC down or hung (bounded, a clear error), a refused node, the programs'
hostlist, drain and log (no credential in it)."""

from __future__ import annotations

import json
from pathlib import Path
import socket
import subprocess
import threading
import time

import pytest

from corral.node import power as program
from corral.node.power_redfish import Redfish, RedfishError
from corral.virtual.bmc import BmcServer, ensure_credentials

USER, PASSWORD = "admin", "s3cret-bmc-pw"


class FakePower:
    """Nodes as booleans; on/off recorded (the real one boots or stops nspawn nodes)."""

    def __init__(self, on: dict[str, bool]) -> None:
        self.state, self.calls, self.done = dict(on), [], threading.Event()

    def is_on(self, name: str) -> bool:
        return self.state[name]

    def on(self, name: str) -> None:
        self.calls.append(("on", name))
        self.state[name] = True
        self.done.set()

    def off(self, name: str, force: bool) -> None:
        self.calls.append(("force-off" if force else "off", name))
        self.state[name] = False
        self.done.set()


@pytest.fixture
def bmc(tmp_path):
    power = FakePower({"gpu01": True, "gpu02": False})
    server = BmcServer(("127.0.0.1", 0), ["gpu01", "gpu02"], power, USER, PASSWORD, tmp_path / "bmc-refuse",
                       tmp_path / "requests.log")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", power, tmp_path
    server.shutdown()
    server.server_close()


def wait(power: FakePower) -> None:
    assert power.done.wait(5), "the BMC never acted"
    power.done.clear()


def test_power_off_and_on(bmc):
    url, power, _ = bmc
    client = Redfish(url, USER, PASSWORD, 5)
    assert client.power("gpu01", on=False) == "GracefulShutdown (was On)"
    wait(power)
    assert client.power("gpu02", on=True) == "On (was Off)"
    wait(power)
    assert power.calls == [("off", "gpu01"), ("on", "gpu02")]
    assert client.power("gpu02", on=True) == "already On" and len(power.calls) == 2  # nothing asked twice


def test_system_found_by_name_among_several(bmc):
    url, _, _ = bmc
    path, data = Redfish(url, USER, PASSWORD, 5).system("gpu02")
    assert path == "/redfish/v1/Systems/gpu02" and data["PowerState"] == "Off"
    with pytest.raises(RedfishError, match="2 systems, none with Id or Name 'gpu09'"):
        Redfish(url, USER, PASSWORD, 5).system("gpu09")


def test_wrong_credentials_are_refused_and_never_shown(bmc):
    url, power, tmp_path = bmc
    with pytest.raises(RedfishError, match="refused the credentials") as err:
        Redfish(url, USER, "wrong-password", 5).power("gpu01", on=False)
    assert "wrong-password" not in str(err.value) and power.calls == []
    assert "wrong-password" not in (tmp_path / "requests.log").read_text()


def test_bmc_down_is_a_clear_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RedfishError, match=r"BMC unreachable .*Connection refused"):
        Redfish(f"http://127.0.0.1:{port}", USER, PASSWORD, 2).power("gpu01", on=True)


def test_hung_bmc_is_bounded():
    with socket.socket() as s:  # accepts the connection (backlog), never answers
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        t0 = time.monotonic()
        with pytest.raises(RedfishError, match=r"BMC unreachable .*bound 1 s"):
            Redfish(f"http://127.0.0.1:{s.getsockname()[1]}", USER, PASSWORD, 1).power("gpu01", on=True)
        assert time.monotonic() - t0 < 5


def test_refused_node_gets_the_bmc_message(bmc):
    url, power, tmp_path = bmc
    (tmp_path / "bmc-refuse").write_text("gpu02\n")
    with pytest.raises(RedfishError, match=r"HTTP 503: gpu02: this emulated BMC was told to refuse"):
        Redfish(url, USER, PASSWORD, 5).power("gpu02", on=True)
    assert power.calls == []


def test_reset_type_outside_allowable_values(bmc):
    url, _, _ = bmc
    client = Redfish(url, USER, PASSWORD, 5)
    with pytest.raises(RedfishError, match="HTTP 400: ResetType 'Nmi'"):
        client.request("POST", "/redfish/v1/Systems/gpu01/Actions/ComputerSystem.Reset", {"ResetType": "Nmi"})
    # the client asks only for what the BMC allows
    target, values = client.allowed("/redfish/v1/Systems/gpu01", {"Actions": {"#ComputerSystem.Reset": {
        "target": "/x", "ResetType@Redfish.AllowableValues": ["ForceOff", "ForceOn"]}}})
    assert (target, values) == ("/x", ["ForceOff", "ForceOn"])


def test_client_honours_allowable_values(monkeypatch):
    client = Redfish("http://bmc.invalid", USER, PASSWORD, 1)
    asked = []
    system = {"PowerState": "On", "Actions": {"#ComputerSystem.Reset": {
        "target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
        "ResetType@Redfish.AllowableValues": ["ForceOff", "PowerCycle"]}}}
    monkeypatch.setattr(client, "system", lambda node: ("/redfish/v1/Systems/1", system))
    monkeypatch.setattr(client, "request", lambda method, path, body=None: asked.append((method, path, body)) or {})
    assert client.power("gpu01", on=False) == "ForceOff (was On)"
    assert asked == [("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", {"ResetType": "ForceOff"})]
    system["PowerState"] = "Off"
    with pytest.raises(RedfishError, match="allows ResetType ForceOff, PowerCycle, none of On, ForceOn"):
        client.power("gpu01", on=True)


# --- the programs slurmctld runs ----------------------------------------------------------------------

def fake_scontrol(calls: list):
    def run(argv, **kwargs):
        calls.append(argv)
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return subprocess.CompletedProcess(argv, 0, "gpu01\ngpu02\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")
    return run


def config(tmp_path, url: str, password: str = PASSWORD) -> str:
    cred = tmp_path / "cred"
    cred.write_text(f"{USER}:{password}\n")
    path = tmp_path / "power.json"
    path.write_text(json.dumps({"nodes": {"gpu01": url, "gpu02": url}, "timeout_s": 3, "verify_tls": True,
                                "credentials_file": str(cred), "log_file": str(tmp_path / "power.log"),
                                "resume_fail_reason": "corral: power: resume failed"}))
    return str(path)


def test_resume_program_powers_the_hostlist_on(bmc):
    url, power, tmp_path = bmc
    calls: list = []
    assert program.main(["--config", config(tmp_path, url), "resume", "gpu[01-02]"], run=fake_scontrol(calls)) == 0
    wait(power)
    assert calls == [["scontrol", "show", "hostnames", "gpu[01-02]"]] and power.calls == [("on", "gpu02")]
    log = (tmp_path / "power.log").read_text()
    assert "power on gpu01: already On" in log and "power on gpu02: On (was Off)" in log
    assert PASSWORD not in log


def test_suspend_program_with_wrong_credentials_fails_and_logs_why(bmc):
    url, power, tmp_path = bmc
    rc = program.main(["--config", config(tmp_path, url, "nope-pw"), "suspend", "gpu[01-02]"], run=fake_scontrol([]))
    assert rc == 1 and power.calls == []
    log = (tmp_path / "power.log").read_text()
    assert "power off gpu01: failed:" in log and "refused the credentials" in log and "nope-pw" not in log


def test_resume_fail_program_drains_with_the_reason(tmp_path):
    calls: list = []
    assert program.main(["--config", config(tmp_path, "http://127.0.0.1:9"), "resume-fail", "gpu02"],
                        run=fake_scontrol(calls)) == 0
    assert calls == [["scontrol", "update", "NodeName=gpu02", "State=DRAIN", "Reason=corral: power: resume failed"]]
    assert "resume failed gpu02: drained" in (tmp_path / "power.log").read_text()


def test_node_without_bmc_and_bad_credentials_file(tmp_path):
    path = config(tmp_path, "http://127.0.0.1:9")
    (tmp_path / "cred").write_text("no-colon-here\n")
    assert program.main(["--config", path, "resume", "gpu01"], run=fake_scontrol([])) == 1
    log = (tmp_path / "power.log").read_text()
    assert "not `user:password` on the first line" in log and "no-colon-here" not in log
    assert program.main(["resume"]) == 2


def test_virtual_credentials_made_once_0600(tmp_path):
    path = tmp_path / "secrets" / "bmc-credentials"
    user, password = ensure_credentials(path)
    assert user == "corral" and len(password) >= 24 and path.stat().st_mode & 0o777 == 0o600
    assert ensure_credentials(path) == (user, password)


# --- sushy: an independent Redfish client ------------------------------------------------------------

def test_sushy_drives_the_emulator(bmc):
    sushy = pytest.importorskip("sushy", reason="sushy (a test dependency: pip install -e .[test]) not installed")
    from sushy import auth
    url, power, _ = bmc
    root = sushy.Sushy(f"{url}/redfish/v1", auth=auth.BasicAuth(USER, PASSWORD))
    assert sorted(root.get_system_collection().members_identities) == ["/redfish/v1/Systems/gpu01",
                                                                       "/redfish/v1/Systems/gpu02"]
    system = root.get_system("/redfish/v1/Systems/gpu02")
    assert system.power_state == sushy.PowerState.OFF
    assert {str(v.value) for v in system.get_allowed_reset_system_values()} == {"On", "ForceOff", "GracefulShutdown"}
    system.reset_system(sushy.ResetType.ON)
    wait(power)
    system.refresh()
    assert system.power_state == sushy.PowerState.ON and power.calls == [("on", "gpu02")]
    with pytest.raises(sushy.exceptions.AccessError):
        sushy.Sushy(f"{url}/redfish/v1", auth=auth.BasicAuth(USER, "wrong")).get_system("/redfish/v1/Systems/gpu01")


def test_program_reads_the_config_paths_installs():
    from corral import paths
    from corral.render.power import RESUME_FAIL_REASON
    assert program.CONFIG == paths.POWER_CONFIG and RESUME_FAIL_REASON == "corral: power: resume failed"


def test_health_check_never_resumes_a_failed_power_on():
    """A node that came up after its ResumeTimeout stays drained for an admin (the BMC or boot failed once)."""
    from corral.node.health_slurm import RESUME, decide
    node = {"name": "gpu02", "state": "IDLE+DRAIN", "base": "IDLE", "flags": {"DRAIN"},
            "reason": "corral: power: resume failed"}
    action, _, why = decide(node, [("gpu_count", "OK", "gpu count 4")])
    assert action != RESUME and "not corral's to resume" in why


def test_the_bmc_process_as_virtual_up_starts_it(tmp_path):
    """`python -m corral.virtual.bmc SPEC` (start_server): listens where the spec says, with credentials it
    made 0600, answers for each compute node (Off: no node runs here), and stops by its PID."""
    from corral.virtual.bmc import start_server, stop_server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "cluster.yaml").write_text(f"""\
name: bmctest
nodes:
  - {{names: ctl, addresses: [127.0.0.10], roles: [controller]}}
  - {{names: "gpu[01-02]", addresses: "127.0.0.[11-12]", roles: [compute]}}
power:
  enabled: true
  bmc:
    scheme: http
    credentials_file: .corral/secrets/bmc-credentials
    nodes: [{{names: "gpu[01-02]", address: "127.0.0.1:{port}"}}]
virtual: {{subnet: 127.0.0.0/24}}
""")
    pid = start_server(tmp_path / "cluster.yaml", tmp_path / "bmc.log")
    try:
        cred = tmp_path / ".corral/secrets/bmc-credentials"
        assert cred.stat().st_mode & 0o777 == 0o600
        user, password = cred.read_text().strip().split(":", 1)
        client = Redfish(f"http://127.0.0.1:{port}", user, password, 5)
        assert client.system("gpu02")[1]["PowerState"] == "Off"
        with pytest.raises(RedfishError, match="refused the credentials"):
            Redfish(f"http://127.0.0.1:{port}", user, "x", 5).system("gpu01")
    finally:
        stop_server(pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and \
            Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[-1][:1] != "Z":
        time.sleep(0.1)
    with pytest.raises(RedfishError, match="unreachable"):
        client.system("gpu01")
    assert password not in (tmp_path / "bmc.log").read_text()


def test_a_redirect_is_not_followed():
    """The credentials go to the configured BMC URL only: a 302 elsewhere is an error, not a second request."""
    from http.server import BaseHTTPRequestHandler, HTTPServer
    seen = []

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append((self.path, self.headers.get("Authorization")))
            self.send_response(302)
            self.send_header("Location", "/elsewhere/redfish/v1/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RedfishError, match="HTTP 302"):
            Redfish(f"http://127.0.0.1:{server.server_address[1]}", USER, PASSWORD, 5).system("gpu01")
    finally:
        server.shutdown()
        server.server_close()
    assert [path for path, _ in seen] == ["/redfish/v1/"]
