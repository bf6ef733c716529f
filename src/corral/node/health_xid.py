"""corral-health's Xid check: kernel log records in, GPU faults out (pure, stdlib only, runs on nodes).

A job user can put any text into the kernel log: a crashing binary's file name is printed in its
segfault record (`a.out[42]: segfault at 0 ip … in <file name>[…]`), a mount option in an unprivileged
user namespace in tmpfs' complaint; a file name may even hold a newline, which dmesg and journalctl's
text output print as a line of its own. So the log is read as records (`journalctl -k -o json`, else
/dev/kmsg, where a newline inside a record is escaped) and an Xid is only a record of the kernel
facility whose whole message is the driver's line, `NVRM: Xid (PCI:0000:3b:00): 79, <text>`: the
start of a message is the driver's, never a user's (a process name leading a message is at most 15
characters, then the kernel's own text).

A fatal Xid stays failed until a reboot (sticky) only when nvidia-smi corroborates it: the GPU at that
address is missing from `nvidia-smi -q`, has an ECC/row-remap finding there, or nvidia-smi itself
fails. Otherwise it fails this run only ("uncorroborated"), so a forged record costs at most one
health interval. Formats: tests/fixtures/health/ (provenance in its README).
"""

from __future__ import annotations

import json
import re

try:
    from . import health_parse as P
except ImportError:  # run as a script on a node: the modules sit side by side
    import health_parse as P  # type: ignore[no-redef]

KERNEL_FACILITY = 0
# Xid (PCI:0000:3b:00): 79, …   Xid (0000:03:00): 14, …   Xid (PCI:0000:01:00 GPU-I:05): 94, …
XID_MESSAGE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
                         r"(?: [A-Za-z-]+:[0-9A-Fa-f]+)*\): (\d{1,3})(?:, ?([^\x00-\x1f\x7f]*))?")
_KMSG_HEAD = re.compile(r"(\d+),(\d+),(\d+),[^;]*;(.*)")


def _text(value) -> str | None:
    """A journal field: a string, or (not UTF-8 / not printable) an array of byte values."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def parse_journal_json(text: str) -> list[dict]:
    """`journalctl -k -o json` (one object a line) -> [{ts, facility, message}] of kernel-transport records."""
    records = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or rec.get("_TRANSPORT") != "kernel":
            continue
        message, facility, ts = _text(rec.get("MESSAGE")), rec.get("SYSLOG_FACILITY"), rec.get("__REALTIME_TIMESTAMP")
        if message is None or not isinstance(facility, str) or not facility.isdigit():
            continue
        records.append({"ts": int(ts) / 1e6 if isinstance(ts, str) and ts.isdigit() else None,
                        "facility": int(facility), "message": message})
    return records


def parse_kmsg(text: str, boot_epoch: float | None = None) -> list[dict]:
    """/dev/kmsg records (`prio,seq,usec,flags;message`, dictionary lines indented) -> [{ts, facility, message}].
    The kernel escapes control characters in the message, so one line is one record."""
    records = []
    for line in text.splitlines():
        m = _KMSG_HEAD.fullmatch(line)
        if not m:
            continue
        ts = round(boot_epoch + int(m.group(3)) / 1e6, 6) if boot_epoch is not None else None
        records.append({"ts": ts, "facility": int(m.group(1)) >> 3, "message": m.group(4)})
    return records


def xid_events(records: list[dict]) -> list[dict]:
    """Records -> [{ts, pci, xid, text}]: kernel-facility records whose whole message is an NVRM Xid line."""
    events = []
    for r in records:
        m = XID_MESSAGE.fullmatch(r["message"]) if r["facility"] == KERNEL_FACILITY else None
        if m:
            events.append({"ts": r["ts"], "pci": m.group(1).lower(), "xid": int(m.group(2)),
                           "text": (m.group(3) or "").strip()})
    return events


def _bus(pci: str) -> tuple[int, int, int]:
    """'0000:3b:00' / '00000000:3B:00.0' -> (domain, bus, device)."""
    parts = pci.split(".")[0].split(":")
    return int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)


def bus_name(bus: tuple[int, int, int]) -> str:
    return "%04x:%02x:%02x" % bus


def listed(smi_q: str | None) -> set[str]:
    """The GPUs nvidia-smi lists now, as 'dddd:bb:dd' (kept in the state file: the GPUs this node has had)."""
    return {bus_name(_bus(bus)) for bus in P.parse_smi_q(smi_q)} if smi_q else set()


def evidence(events: list[dict], smi_q: str | None, smi_failure: str, known: set[str] = frozenset()) -> dict[str, str]:
    """PCI address -> what nvidia-smi shows of a fault there (no entry: nothing corroborates it).

    smi_q: `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` output (None: not run); smi_failure:
    why it gave no usable output ('' when it ran): a driver that cannot reach its GPUs is evidence.
    known: the GPUs this node has had ('dddd:bb:dd', listed() of earlier runs): a GPU missing from the list
    corroborates an Xid only at an address where a GPU was (an address that never had one proves nothing)."""
    if smi_q is None:
        return {}
    if smi_failure:
        return {e["pci"]: f"nvidia-smi: {smi_failure}" for e in events}
    gpus = {_bus(bus): fields for bus, fields in P.parse_smi_q(smi_q).items()}
    if not gpus:  # nothing per GPU to compare (e.g. the virtual cluster's stand-in)
        return {}
    out = {}
    for e in events:
        fields = gpus.get(_bus(e["pci"]))
        if fields is None:
            if bus_name(_bus(e["pci"])) in known:
                out[e["pci"]] = "GPU not listed by nvidia-smi"
        elif fails := P.ecc_findings(fields)[0]:
            out[e["pci"]] = fails[0]
    return out


def _describe(e: dict) -> str:
    return f"xid {e['xid']} on {e['pci']}"


def _detail(text: str) -> str:
    text = re.sub(r"^(pid=[^,]*,\s*)?(name=[^,]*,\s*)?", "", text).strip()
    return text if len(text) <= 60 else text[:57] + "..."


def _summary(events: list[dict], note: str = "") -> str:
    names: list[str] = []
    for e in events:
        if _describe(e) not in names:
            names.append(_describe(e))
    detail = _detail(events[0]["text"])
    msg = names[0] + note + (f" ({detail})" if detail else "")
    if len(names) > 1:
        msg += f" and {len(names) - 1} more: " + ", ".join(names[1:4])
    return msg


def xid_verdict(sticky: list[dict], events: list[dict], since: float | None, ignore=P.APPLICATION_XIDS,
                proof: dict[str, str] | None = None) -> tuple[str, str, list[dict]]:
    """Events read this run + fatal ones kept from earlier runs of this boot -> (status, message, sticky').

    A corroborated fatal Xid (its PCI address in `proof`) stays FAIL, so the node stays drained, until
    a reboot or --clear-xid: a GPU that fell off the bus does not come back by itself. An uncorroborated
    one fails this run only. Application Xids are listed, never fatal."""
    proof = proof or {}
    new = [e for e in events if since is None or e["ts"] is None or e["ts"] >= since]
    kept = list(sticky)
    seen = {(e["ts"], e["pci"], e["xid"]) for e in kept}
    unproven = []
    for e in new:
        key = (e["ts"], e["pci"], e["xid"])
        if e["xid"] in ignore or key in seen:
            continue
        seen.add(key)
        (kept if e["pci"] in proof else unproven).append(e)
    if kept:
        return P.FAIL, _summary(kept), kept
    if unproven:
        return P.FAIL, _summary(unproven, ", uncorroborated by nvidia-smi"), kept
    ignored = [e for e in new if e["xid"] in ignore]
    if ignored:
        counts: dict[int, int] = {}
        for e in ignored:
            counts[e["xid"]] = counts.get(e["xid"], 0) + 1
        listed = ", ".join(f"{x} x{n}" for x, n in sorted(counts.items()))
        return P.OK, f"only application Xids (not GPU faults): {listed}", kept
    return P.OK, "no Xid errors in the kernel log" + (" since the last run" if since else " this boot"), kept
