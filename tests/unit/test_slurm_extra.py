"""Pass-through slurm.conf keys (slurm.extra, slurm.partitions[].extra): rendered last and sorted, clean
for the lint; refused with file:line:col when corral renders the key itself, when Slurm does not know
it, when it names a program, or when its value is not one safe word. RENDERED_KEYS is exactly what
render/slurm.py writes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from corral.errors import CorralError, SpecError
from corral.render import NodeHW, render_slurm_conf
from corral.render import slurm_lint
from corral.render.slurm import extra_words
from corral.render.slurm_lint import lint_slurm_conf
from corral.spec import slurm_keys
from corral.spec.loader import load_text
from corral.spec.slurm_keys import RENDERED_KEYS, RENDERED_PARTITION_KEYS

BASE = textwrap.dedent("""\
    name: lab
    nodes:
      - {names: ctl, addresses: [10.0.0.10], roles: [controller, accounting]}
      - {names: "gpu[01-02]", addresses: "10.0.0.[11-12]", roles: [compute], gpus: {model: h100, count: 8}}
    slurm:
      qos: [{name: normal}, {name: low, preempt_mode: requeue}, {name: high, preempt: [low]}]
      partitions:
        - name: gpu
          default: true
          qos: normal
          extra: {MaxNodes: 2, AllowAccounts: research, Hidden: false}
        - name: debug
          nodes: gpu01
      extra:
        SchedulerParameters: bf_continue,bf_max_job_test=500
        MaxJobCount: 20000
        DisableRootJobs: true
    """)
#  1 name: lab                          10         qos: normal
#  2 nodes:                             11         extra: {MaxNodes: 2, ...}
#  3   - {names: ctl, ...}              12       - name: debug
#  4   - {names: "gpu[01-02]", ...}     13         nodes: gpu01
#  5 slurm:                             14   extra:
#  6   qos: [...]                       15     SchedulerParameters: ...
#  7   partitions:                      16     MaxJobCount: 20000
#  8     - name: gpu                    17     DisableRootJobs: true
#  9       default: true


def _conf(text: str = BASE, version=(22, 5)) -> str:
    cluster = load_text(text, "cluster.yaml")
    hw = {n.name: NodeHW(64, 2, 16, 2, 512000) for n in cluster.with_role("compute")}
    return render_slurm_conf(cluster, hw, version=version)


def _problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as exc:
        load_text(text, "cluster.yaml")
    return [str(p) for p in exc.value.problems]


def test_extras_are_rendered_last_sorted_and_lint_clean():
    lines = _conf().rstrip("\n").split("\n")
    assert lines[-4:] == ["# More slurm.conf parameters (slurm.extra)", "DisableRootJobs=YES",
                          "MaxJobCount=20000", "SchedulerParameters=bf_continue,bf_max_job_test=500"]
    gpu = next(line for line in lines if line.startswith("PartitionName=gpu "))
    assert gpu.endswith("OverSubscribe=NO State=UP AllowAccounts=research Hidden=NO MaxNodes=2")
    debug = next(line for line in lines if line.startswith("PartitionName=debug "))
    assert debug.endswith("State=UP")
    assert lint_slurm_conf(_conf()) == []


def test_without_extras_nothing_is_added():
    text = BASE.split("      extra: {MaxNodes")[0] + "    - name: debug\n      nodes: gpu01\n"
    conf = _conf(text)
    assert "slurm.extra" not in conf and "MaxJobCount" not in conf
    assert conf.rstrip("\n").split("\n")[-1].startswith("PartitionName=debug")


def test_a_change_of_an_extra_is_a_one_line_diff():
    before, after = _conf(), _conf(BASE.replace("MaxJobCount: 20000", "MaxJobCount: 30000"))
    changed = [(a, b) for a, b in zip(before.split("\n"), after.split("\n")) if a != b]
    assert changed == [("MaxJobCount=20000", "MaxJobCount=30000")]


@pytest.mark.parametrize("key, where, fix", [
    ("PriorityDecayHalfLife", "cluster.yaml:17:5", "use the spec key slurm.fairshare.decay_half_life"),
    ("DefMemPerGPU", "cluster.yaml:17:5", "use the spec key slurm.def_mem_per_gpu_mb"),
    ("SelectType", "cluster.yaml:17:5", "remove it: corral sets it itself"),
    ("prolog", "cluster.yaml:17:5", "remove it: corral sets it itself"),
    ("PrologFlags", "cluster.yaml:17:5", "use the spec key identity.pam_slurm_adopt, slurm.clean_jobs"),
])
def test_a_key_corral_renders_is_a_located_error(key, where, fix):
    problems = _problems(BASE.replace("DisableRootJobs: true", f"{key}: 7-0"))
    assert problems == [f"{where}: slurm.extra.{key}: corral renders this key (got {key!r}); fix: {fix}"]


def test_a_partition_key_corral_renders_is_a_located_error():
    problems = _problems(BASE.replace("extra: {MaxNodes: 2,", "extra: {MaxTime: 60,"))
    assert problems == ["cluster.yaml:11:15: slurm.partitions.0.extra.MaxTime: corral renders this key "
                        "(got 'MaxTime'); fix: use the spec key slurm.partitions[].max_time"]


def test_a_port_corral_relies_on_is_refused():
    problems = _problems(BASE.replace("DisableRootJobs: true", "SlurmctldPort: 7000"))
    assert problems == ["cluster.yaml:17:5: slurm.extra.SlurmctldPort: corral relies on its default 6817 "
                        "(configless slurmd, doctor) (got 'SlurmctldPort'); fix: remove it"]


def test_a_default_memory_key_that_would_clash_with_corrals_is_refused():
    problems = _problems(BASE.replace("DisableRootJobs: true", "DefMemPerNode: 4096")
                         .replace("extra: {MaxNodes: 2,", "extra: {DefMemPerGPU: 2,"))
    assert [p.split(": Slurm takes one of")[0] for p in problems] == [
        "cluster.yaml:17:5: slurm.extra.DefMemPerNode", "cluster.yaml:11:15: slurm.partitions.0.extra.DefMemPerGPU"]


@pytest.mark.parametrize("key, fix", [
    ("SchedulerParameter", "did you mean 'SchedulerParameters'?"),
    ("MaxNodes", "MaxNodes is a partition parameter: set it in slurm.partitions[].extra"),
    ("Include", "see slurm.conf(5) for the parameters Slurm knows"),
    ("NodeName", "see slurm.conf(5) for the parameters Slurm knows"),
])
def test_an_unknown_key_is_a_located_error(key, fix):
    problems = _problems(BASE.replace("DisableRootJobs: true", f"{key}: x"))
    assert problems == [f"cluster.yaml:17:5: slurm.extra.{key}: not a slurm.conf parameter "
                        f"(got {key!r}); fix: {fix}"]


def test_an_unknown_partition_key_is_a_located_error():
    problems = _problems(BASE.replace("extra: {MaxNodes: 2,", "extra: {MaxJobCount: 2,"))
    assert problems == ["cluster.yaml:11:15: slurm.partitions.0.extra.MaxJobCount: not a PartitionName= "
                        "parameter (got 'MaxJobCount'); fix: MaxJobCount is a global parameter: set it in "
                        "slurm.extra"]


def test_a_key_spelt_otherwise_and_a_program_key_are_refused():
    problems = _problems(BASE.replace("DisableRootJobs: true", "maxjobcount: 5\n    PrologSlurmctld: /tmp/x.sh"))
    assert problems[0] == ("cluster.yaml:17:5: slurm.extra.maxjobcount: spell it as slurm.conf(5) does "
                           "(got 'maxjobcount'); fix: write MaxJobCount")
    assert problems[1].startswith("cluster.yaml:18:5: slurm.extra.PrologSlurmctld: names a program Slurm runs")


@pytest.mark.parametrize("value", ['"bf_continue\\nPrologSlurmctld=/tmp/x.sh"', '"a b"', '"x#y"', "\"it's\"",
                                   '"$(id)"', '"a\\\\b"', '""', '"`id`"'])
def test_a_hostile_value_is_a_located_error(value):
    problems = _problems(BASE.replace("DisableRootJobs: true", f"SchedulerType: {value}"))
    assert len(problems) == 1 and problems[0].startswith("cluster.yaml:17:20: slurm.extra.SchedulerType: not one word")


def test_a_hostile_partition_value_is_a_located_error():
    problems = _problems(BASE.replace("AllowAccounts: research", 'AllowAccounts: "a\\nPrologSlurmctld=/x"'))
    assert len(problems) == 1
    assert problems[0].startswith("cluster.yaml:11:43: slurm.partitions.0.extra.AllowAccounts: not one word")


def test_the_renderer_refuses_a_rendered_key_even_without_the_spec_check():
    assert extra_words({"b": "1", "A": "2"}, RENDERED_KEYS, "slurm.extra") == ["A=2", "b=1"]
    with pytest.raises(CorralError, match="corral renders this key"):
        extra_words({"maxtime": "1"}, RENDERED_PARTITION_KEYS, "slurm.partitions[gpu].extra")


def _keys(conf: str) -> tuple[set[str], set[str]]:
    flat, part = set(), set()
    for line in conf.split("\n"):
        if not line or line.startswith("#") or line.startswith("NodeName="):
            continue
        words = [w.partition("=")[0] for w in line.split()]
        (part if words[0] == "PartitionName" else flat).update(words)
    return flat, part


def test_rendered_keys_are_exactly_what_the_renderer_writes():
    """Every key corral can write, over specs that make it write each one: none missing, none stale."""
    no_extra = BASE.split("      extra: {MaxNodes")[0] + "    - name: debug\n      nodes: gpu01\n"
    ipv6 = no_extra.replace("[10.0.0.10]", "['fd00::10']").replace("slurm:\n", "slurm:\n  slurmctld_timeout_s: 60\n", 1)
    flat, part = set(), set()
    for text, version in ((no_extra, (22, 5)), (ipv6, (23, 11)), (no_extra, (19, 0))):
        f, p = _keys(_conf(text, version))
        flat |= f
        part |= p
    from corral.spec.loader import load  # power saving's keys: the golden case (its credentials file is there)
    flat |= _keys(render_slurm_conf(load(Path(__file__).parents[1] / "golden/render/power/cluster.yaml"), {}))[0]
    flat |= _keys(render_slurm_conf(load(Path(__file__).parents[1] / "golden/render/fabric_tree/cluster.yaml"), {}))[0]
    routed = no_extra + "topology: {route: true, switches: [{name: top, switches: [leaf]}, {name: leaf, nodes: 'gpu[01-02]'}]}\n"
    for version in ((22, 5), (23, 11)):  # RoutePlugin, then TopologyParam=RouteTree
        flat |= _keys(_conf(routed, version))[0]
    for version in ((22, 5), (26, 5)):  # JobContainerType, then NamespaceType
        flat |= _keys(_conf(no_extra.replace("slurm:\n", "slurm:\n  clean_jobs: true\n", 1), version))[0]
    assert flat == set(RENDERED_KEYS)
    assert part == set(RENDERED_PARTITION_KEYS)


def test_the_lint_reads_the_key_lists_from_the_spec_layer():
    assert slurm_lint.SLURM_KEYS is slurm_keys.SLURM_KEYS
    assert slurm_lint.SLURM_LINES is slurm_keys.SLURM_LINES
    assert slurm_lint.PROGRAM_KEYS is slurm_keys.PROGRAM_KEYS
    for table in (RENDERED_KEYS, slurm_keys.RESERVED_KEYS):
        assert {k.lower() for k in table} <= slurm_keys.SLURM_KEYS
    for table in (RENDERED_PARTITION_KEYS, slurm_keys.RESERVED_PARTITION_KEYS):
        assert {k.lower() for k in table} <= slurm_keys.SLURM_LINES["partitionname"]
