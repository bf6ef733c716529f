"""The resources model's views (render/resources.py): a service's declared restart policy becomes its drop-in and
a daemon-reload before the service, in every view (render, the snapshot's paths, apply's order); a removed
daemon's paths and unit are in the snapshot's Want."""

from __future__ import annotations

import configparser

from corral.render import resources as r
from corral.render.restart import CALM, Policy, dropin_path

POLICY = Policy(**CALM, binds=True, why="a test daemon")
ITEMS = [r.File("/etc/x.conf", "x\n"), r.Service("x", "x running", policy=POLICY, restart_on=("/etc/x.conf",)),
         r.Removed("y", "y removed", ("/etc/y.conf", "/etc/systemd/system/y.service.d/corral.conf"))]


def test_a_declared_policy_is_a_dropin_then_a_reload_before_its_service():
    kinds = [(type(i).__name__, getattr(i, "path", getattr(i, "unit", ""))) for i in r.expanded(ITEMS)]
    assert kinds == [("File", "/etc/x.conf"), ("File", dropin_path("x")), ("OnChange", ""), ("Service", "x"),
                     ("Removed", "y")]
    reload = r.expanded(ITEMS)[2]
    assert isinstance(reload, r.OnChange) and reload.paths == (dropin_path("x"),)
    assert reload.commands == (("systemctl", "daemon-reload"),)


def test_the_dropin_is_rendered_seen_by_the_snapshot_and_read_by_systemd_as_declared(tmp_path):
    text = r.files(ITEMS, tmp_path)[dropin_path("x")]
    ini = configparser.ConfigParser(strict=False)
    ini.read_string(str(text))
    assert ini["Unit"]["StartLimitBurst"] == str(POLICY.burst) and ini["Unit"]["After"] == "network-online.target"
    assert ini["Service"]["Restart"] == "on-failure" and ini["Service"]["RestartSec"] == str(POLICY.restart_sec)
    assert dropin_path("x") in r.paths(ITEMS)
    assert {"/etc/y.conf", "/etc/systemd/system/y.service.d/corral.conf"} <= set(r.paths(ITEMS))
    assert r.services(ITEMS) == ("x", "y")


def test_a_service_without_a_policy_gets_no_dropin(tmp_path):
    items = [r.Service("z", "z running")]
    assert r.expanded(items) == items and r.files(items, tmp_path) == {}
