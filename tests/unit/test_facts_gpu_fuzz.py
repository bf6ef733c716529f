"""Every GPU/fabric parser, fed damaged captures or noise, either parses or raises CorralError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.errors import CorralError
from corral.facts.gpu import parse_kernel_module, parse_lspci_nn, parse_nvidia_smi, parse_pci_sysfs, parse_query_gpu
from corral.facts.gpu_topology import gres_cores, gres_links, nvlink_pairs, parse_topology
from corral.facts.infiniband import parse_ib_ports

GPU = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
CAPTURES = {p.relative_to(GPU).as_posix(): p.read_text() for p in GPU.rglob("*") if p.is_file()}


def topology(text: str):
    t = parse_topology(text)
    return nvlink_pairs(t), gres_links(t), gres_cores(t)


PARSERS = {
    "lspci": parse_lspci_nn, "topo": topology, "query": parse_query_gpu,
    "smi": lambda t: parse_nvidia_smi(t.splitlines()), "sysfs": lambda t: parse_pci_sysfs(t.splitlines()),
    "module": lambda t: parse_kernel_module(t.splitlines()), "ib": lambda t: parse_ib_ports(t.splitlines()),
}


@st.composite
def damaged(draw) -> str:
    """A fixture with lines dropped, duplicated, truncated or swapped for noise."""
    lines = CAPTURES[draw(st.sampled_from(sorted(CAPTURES)))].splitlines()
    out = []
    for line in lines:
        action = draw(st.integers(0, 9))
        if action == 0:
            continue
        if action == 1:
            line = line[: draw(st.integers(0, max(0, len(line))))]
        elif action == 2:
            line = draw(st.text(alphabet="GPUNVX0123456789 \t-,:.[]/SYPIXHBODE", max_size=40))
        out.append(line)
        if action == 3:
            out.append(line)
    return "\n".join(out)


def check(parser, text: str) -> None:
    try:
        parser(text)
    except CorralError as exc:
        assert str(exc)  # every error says something


@settings(max_examples=300, deadline=None)
@given(damaged(), st.sampled_from(sorted(PARSERS)))
def test_damaged_captures(text, name):
    check(PARSERS[name], text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.sampled_from(sorted(PARSERS)))
def test_noise(text, name):
    check(PARSERS[name], text)


def test_every_capture_through_every_parser():
    for text in CAPTURES.values():
        for parser in PARSERS.values():
            check(parser, text)
