"""corral-health's Xid check (node/health_xid.py) on kernel log records: captured NVRM lines, records a
job user can produce (captured), corroboration by nvidia-smi, and a fuzz of user-controlled text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from corral.node import health_parse as P, health_xid as X

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "health"
H100 = (FIX / "nvidia-smi-q-ecc-h100x8.txt").read_text()


def fx(name: str) -> str:
    return (FIX / name).read_text()


def journal_events(name: str) -> list[dict]:
    return X.xid_events(X.parse_journal_json(fx(name)))


def test_journal_json_records():
    ev = journal_events("journalctl-k-xid.json")
    assert [(e["xid"], e["pci"]) for e in ev] == [(13, "0000:af:00"), (31, "0000:af:00"), (63, "0000:10:1c"),
                                                  (94, "0000:01:00"), (79, "0000:05:00")]
    assert ev[4]["ts"] == pytest.approx(1749532840.414765)
    assert ev[4]["text"].endswith("GPU has fallen off the bus.")
    assert X.parse_journal_json(fx("journalctl-k-empty.txt")) == []


def test_kmsg_records_with_and_without_boot_time():
    """The /dev/kmsg fallback: dictionary lines skipped, a record root wrote (facility user) is no Xid."""
    records = X.parse_kmsg(fx("kmsg-xid.txt"), boot_epoch=1_700_000_000.0)
    assert len(records) == 7 and records[-1]["facility"] == 1
    ev = X.xid_events(records)
    assert [(e["xid"], e["pci"]) for e in ev] == [(14, "0000:03:00"), (79, "0000:09:00")]
    assert ev[1]["ts"] == pytest.approx(1_700_000_228.414765)
    assert [e["ts"] for e in X.xid_events(X.parse_kmsg(fx("kmsg-xid.txt")))] == [None, None]


@pytest.mark.parametrize("name", ["journalctl-k-hostile-segfault.json", "kmsg-hostile-segfault.txt"])
def test_a_users_segfault_record_is_no_xid(name):
    """Captured: a non-root user's binary named `NVRM: Xid (PCI:0000:3b:00): 79, …` (also after a newline)
    crashed; the records are the kernel's (facility 0) but their message starts with the process name."""
    records = X.parse_journal_json(fx(name)) if name.endswith(".json") else X.parse_kmsg(fx(name), 1.0)
    assert len(records) == 4 and all(r["facility"] == 0 for r in records)
    assert any("NVRM: Xid (PCI:0000:3b:00): 79" in r["message"] for r in records)
    assert X.xid_events(records) == []


def test_a_journal_record_of_another_transport_or_facility_is_no_xid():
    line = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "__REALTIME_TIMESTAMP": "1749532840414765",
            "MESSAGE": "NVRM: Xid (PCI:0000:05:00): 79, pid=1, GPU has fallen off the bus."}
    assert len(X.xid_events(X.parse_journal_json(json.dumps(line)))) == 1
    for change in ({"_TRANSPORT": "syslog"}, {"SYSLOG_FACILITY": "1"}, {"SYSLOG_FACILITY": None},
                   {"MESSAGE": "x\n" + line["MESSAGE"]}, {"MESSAGE": line["MESSAGE"] + "\nmore"}):
        assert X.xid_events(X.parse_journal_json(json.dumps({**line, **change}))) == [], change
    as_bytes = {**line, "MESSAGE": list(line["MESSAGE"].encode())}  # journalctl's form for binary fields
    assert len(X.xid_events(X.parse_journal_json(json.dumps(as_bytes)))) == 1


# --- corroboration -------------------------------------------------------------------------------

KNOWN = {"0000:10:1c", "0000:01:00", "0000:05:00"}  # the fixture's Xid addresses: GPUs an earlier run listed


def test_evidence_from_nvidia_smi():
    on = lambda pci: [{"ts": 1.0, "pci": pci, "xid": 79, "text": ""}]  # noqa: E731
    assert X.evidence(on("0000:3a:00"), H100, "") == {}                                 # listed, healthy
    # a GPU this node had, missing now: evidence; an address where no GPU ever was proves nothing (review 3, N9)
    assert X.evidence(on("0000:3b:00"), H100, "", {"0000:3b:00"}) == {"0000:3b:00": "GPU not listed by nvidia-smi"}
    assert X.evidence(on("0000:3b:00"), H100, "") == {} == X.evidence(on("0000:ff:00"), H100, "", {"0000:3b:00"})
    assert "0000:3a:00" in X.listed(H100) and "0000:3b:00" not in X.listed(H100)
    errors = fx("nvidia-smi-q-ecc-h100x8-errors.txt")
    assert X.evidence(on("0000:3a:00"), errors, "") == {"0000:3a:00": "2 uncorrectable ECC errors"}
    assert X.evidence(on("0000:3a:00"), "", "nvidia-smi exited 15: Unable to determine the device handle") == {
        "0000:3a:00": "nvidia-smi: nvidia-smi exited 15: Unable to determine the device handle"}
    assert X.evidence(on("0000:3b:00"), fx("standin-q-ecc.txt"), "") == {}              # nothing per GPU
    assert X.evidence(on("0000:3b:00"), None, "") == {}                                 # no nvidia-smi


def test_a_corroborated_fatal_xid_is_named_and_kept():
    ev = journal_events("journalctl-k-xid.json")
    proof = X.evidence(ev, H100, "", KNOWN)  # GPUs the node had at these addresses
    status, msg, kept = X.xid_verdict([], ev, None, proof=proof)
    assert status == P.FAIL
    assert msg.startswith("xid 63 on 0000:10:1c (Row Remapper: New row marked for remapping")
    assert msg.endswith("and 2 more: xid 94 on 0000:01:00, xid 79 on 0000:05:00")
    assert [e["xid"] for e in kept] == [63, 94, 79]
    # the next run sees nothing new, but the fault stays until a reboot or --clear-xid
    assert X.xid_verdict(kept, [], 1_800_000_000.0) == (status, msg, kept)


def test_an_uncorroborated_fatal_xid_fails_this_run_only():
    ev = [e for e in journal_events("journalctl-k-xid.json") if e["xid"] == 79]
    status, msg, kept = X.xid_verdict([], ev, None, proof={})
    assert (status, kept) == (P.FAIL, [])
    assert msg == "xid 79 on 0000:05:00, uncorroborated by nvidia-smi (GPU has fallen off the bus.)"
    assert X.xid_verdict(kept, [], 1_800_000_000.0)[0] == P.OK                     # next run: healthy


def test_application_errors_since_and_ignore():
    ev = journal_events("journalctl-k-xid.json")
    assert X.xid_verdict([], ev[:2], None) == (P.OK, "only application Xids (not GPU faults): 13 x1, 31 x1", [])
    assert X.xid_verdict([], ev, 1749532840.5)[0] == P.OK           # all before the last run
    status, msg, _ = X.xid_verdict([], ev, 1749532000.0, proof={"0000:05:00": "GPU not listed by nvidia-smi"})
    assert (status, msg) == (P.FAIL, "xid 79 on 0000:05:00 (GPU has fallen off the bus.)")
    assert X.xid_verdict([], ev, None, ignore={13, 31, 63, 94, 79})[0] == P.OK


# --- the class: text a user controls never makes an Xid ------------------------------------------

XID_TEXT = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
# where the kernel prints text a user chose (process name <= 15 characters, file names, mount options)
USER_FORMATS = ["{comm}[4242]: segfault at 0 ip 00005636055e5132 sp 00007ffdebec08c0 error 6 in {name}"
                "[1132,5636055e5000+1000] likely on CPU 0 (core 0, socket 0)",
                "traps: {comm}[4242] general protection fault ip:401000 sp:7ffd error:0 in {name}[401000+1000]",
                "tmpfs: Unknown parameter '{name}'", "{comm} ({pid}): drop_caches: 3",
                "audit: type=1400 audit(0.0:1): apparmor=\"DENIED\" comm=\"{comm}\" name=\"{name}\"",
                "Out of memory: Killed process 4242 ({comm}) total-vm:1kB"]
user_text = st.one_of(st.text(max_size=120), st.sampled_from([XID_TEXT, "\n" + XID_TEXT, XID_TEXT + "\n",
                                                             "x\n" + XID_TEXT, "NVRM: Xid (PCI:"]),
                      st.builds(lambda a, b: a + XID_TEXT + b, st.text(max_size=20), st.text(max_size=20)))


def _kmsg_escape(text: str) -> str:
    """What the kernel does to a message in /dev/kmsg: control characters and backslash as \\xNN."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 or c == "\\" else c for c in text)


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from(USER_FORMATS), name=user_text, comm=user_text, pid=st.integers(0, 1 << 22))
@pytest.mark.attack
def test_user_text_in_any_kernel_message_never_makes_an_xid(fmt, name, comm, pid):
    message = fmt.format(name=name, comm=comm[:15], pid=pid)
    journal = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "__REALTIME_TIMESTAMP": "1749532840414765",
               "MESSAGE": message}
    kmsg = f"6,1,228414765,-;{_kmsg_escape(message)}\n"
    for records in (X.parse_journal_json(json.dumps(journal)), X.parse_kmsg(kmsg, 1.0)):
        assert records and X.xid_events(records) == []
        # and so nothing is ever kept past this run
        assert X.xid_verdict([], X.xid_events(records), None, proof={"0000:3b:00": "x"})[2] == []


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=400))
def test_any_text_from_journalctl_or_kmsg_is_never_an_error(text):
    for records in (X.parse_journal_json(text), X.parse_kmsg(text, 1.0)):
        X.xid_events(records)
