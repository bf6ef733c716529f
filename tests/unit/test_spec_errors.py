"""Golden error messages of the spec loader: every class of mistake, with its file:line:col.

Each case edits the valid spec GOOD (line numbers below) and pins str(SpecError) exactly, one line
per problem. A change to any message is deliberate: update the golden text here.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from corral.errors import CorralError, Problem, SpecError
from corral.spec.loader import load, load_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spec"
LOCATED = re.compile(r"^.+:\d+:\d+$")

GOOD = textwrap.dedent("""\
    name: lab
    nodes:
      - names: ctl1
        addresses: [10.0.0.10]
        roles: [controller]
      - names: gpu[01-02]
        addresses: 10.0.0.[11-12]
        roles: [compute]
        gpus: {model: h100, count: 4}
    slurm:
      partitions:
        - name: gpu
          nodes: gpu[01-02]
          default: true
          qos: normal
      qos:
        - name: normal
        - name: high
    """)
#  1 name: lab                        11   partitions:
#  2 nodes:                           12     - name: gpu
#  3   - names: ctl1                  13       nodes: gpu[01-02]
#  4     addresses: [10.0.0.10]       14       default: true
#  5     roles: [controller]          15       qos: normal
#  6   - names: gpu[01-02]            16   qos:
#  7     addresses: 10.0.0.[11-12]    17     - name: normal
#  8     roles: [compute]             18     - name: high
#  9     gpus: {model: h100, count: 4}
# 10 slurm:

LAUGHS = ("a: &a [x,x,x,x,x,x,x,x,x,x]\n"
          "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
          "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
          "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
          "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
          "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n")


def case(name: str, text: str, *expected: str):
    return pytest.param(text, list(expected), id=name)


CASES = [
    case('unknown-top-key',
         GOOD.replace("name: lab\n", "name: lab\nschedular: slurm\n"),
         "c.yaml:2:1: unknown key 'schedular'; fix: did you mean 'scheduler'?",),
    case('unknown-group-key',
         GOOD.replace("    roles: [controller]\n", "    roles: [controller]\n    memory: 1024\n"),
         "c.yaml:6:5: unknown key 'nodes.0.memory'; fix: did you mean 'memory_mb'?",),
    case('unknown-gpus-key',
         GOOD.replace("{model: h100, count: 4}", "{model: h100, count: 4, nvlnk: true}"),
         "c.yaml:9:35: unknown key 'nodes.1.gpus.nvlnk'; fix: did you mean 'nvlink'?",),
    case('unknown-override-key',
         GOOD.replace("    gpus: {model: h100, count: 4}\n", "    gpus: {model: h100, count: 4}\n    overrides:\n      gpu01: {memroy_mb: 1024}\n"),
         "c.yaml:11:15: unknown key 'nodes.1.overrides.gpu01.memroy_mb'; fix: did you mean 'memory_mb'?",),
    case('unknown-key-no-match',
         GOOD.replace("name: lab\n", "name: lab\nzzz: 1\n"),
         "c.yaml:2:1: unknown key 'zzz'; fix: valid keys here: acceptance, allow_http, audit, backup, fabric, groups, health, identity, images, kubernetes, monitoring, name, nodes, nvidia, packages, power, proxy, reports, rollout, scheduler, slurm, software, ssh, state_dir, storage, topology, users, virtual, workbench",),
    case('missing-name',
         GOOD.replace("name: lab\n", ""),
         "c.yaml:1:1: missing required key 'name'; fix: add 'name:'",),
    case('missing-roles',
         GOOD.replace("    roles: [compute]\n", ""),
         "c.yaml:6:5: missing required key 'nodes.1.roles'; fix: add 'roles:'",),
    case('missing-gpu-count',
         GOOD.replace("{model: h100, count: 4}", "{model: h100}"),
         "c.yaml:9:11: missing required key 'nodes.1.gpus.count'; fix: add 'count:'",),
    case('wrong-type-count',
         GOOD.replace("count: 4", "count: four"),
         "c.yaml:9:32: nodes.1.gpus.count: must be a whole number (got 'four'); fix: give a value of the expected type",),
    case('wrong-type-nodes',
         "name: lab\nnodes: gpu01\n",
         "c.yaml:2:8: nodes: must be a list, e.g. [a, b] (got 'gpu01'); fix: give a value of the expected type",),
    case('wrong-type-addresses',
         GOOD.replace("addresses: [10.0.0.10]", "addresses: 10"),
         'c.yaml:4:16: nodes.0.addresses: must be a list, e.g. [a, b] or must be text (got 10); fix: give a value of the expected type',),
    case('wrong-type-address-item',
         GOOD.replace("addresses: [10.0.0.10]", "addresses: [10]"),
         'c.yaml:4:17: nodes.0.addresses.0: must be text (got 10); fix: give a value of the expected type',),
    case('wrong-type-bool',
         GOOD.replace("default: true", "default: maybe"),
         "c.yaml:14:16: slurm.partitions.0.default: must be true or false (got 'maybe'); fix: give a value of the expected type",),
    case('negative-gpu-count',
         GOOD.replace("count: 4", "count: -1"),
         'c.yaml:9:32: nodes.1.gpus.count: must be at least 0 (got -1); fix: use a value in the allowed range',),
    case('too-many-gpus',
         GOOD.replace("count: 4", "count: 65"),
         'c.yaml:9:32: nodes.1.gpus.count: must be at most 64 (got 65); fix: use a value in the allowed range',),
    case('unknown-scheduler',
         GOOD.replace("name: lab\n", "name: lab\nscheduler: pbs\n"),
         "c.yaml:2:12: scheduler: must be one of 'slurm' or 'kubernetes' (got 'pbs'); fix: use one of 'slurm' or 'kubernetes'",),
    case('unknown-role',
         GOOD.replace("roles: [compute]", "roles: [compte]"),
         "c.yaml:8:13: nodes.1.roles.0: must be one of 'controller', 'compute', 'login', 'accounting', 'monitoring', 'nfs', 'control-plane' or 'worker' (got 'compte'); fix: use one of 'controller', 'compute', 'login', 'accounting', 'monitoring', 'nfs', 'control-plane' or 'worker'",),
    case('bad-name-pattern',
         GOOD.replace("name: lab", "name: My Lab"),
         "c.yaml:1:7: name: does not have the expected form (got 'My Lab'); fix: the value must match ^[a-z0-9]([a-z0-9_-]{0,62})$",),
    case('bad-override-address',
         GOOD.replace("    gpus: {model: h100, count: 4}\n", "    gpus: {model: h100, count: 4}\n    overrides:\n      gpu01: {address: 10.0.0.300}\n"),
         "c.yaml:11:24: nodes.1.overrides.gpu01.address: must be an IP address (got '10.0.0.300'); fix: give an IP address, e.g. 10.0.0.11",),
    case('bad-hostlist',
         GOOD.replace("names: gpu[01-02]", "names: gpu[01-02"),
         "c.yaml:6:12: bad hostlist 'gpu[01-02': unbalanced brackets; fix: write names like 'gpu[01-16]' or 'ctl1,login1'",),
    case('bad-node-name',
         GOOD.replace("names: ctl1", "names: CTL1"),
         "c.yaml:3:12: 'CTL1' is not a valid node name (lowercase letters, digits, '-'); fix: write names like 'gpu[01-16]' or 'ctl1,login1'",),
    case('duplicate-name-in-group',
         GOOD.replace("names: gpu[01-02]", "names: gpu01,gpu01"),
         "c.yaml:6:12: hostlist 'gpu01,gpu01' names 'gpu01' more than once; fix: write names like 'gpu[01-16]' or 'ctl1,login1'",),
    case('bad-address-range',
         GOOD.replace("10.0.0.[11-12]", "10.0.0.12-11"),
         "c.yaml:7:16: address range '10.0.0.12-11' ends before it starts; fix: give a list, a range '10.0.0.11-26' or '10.0.0.[11-26]'",),
    case('bad-address',
         GOOD.replace("addresses: [10.0.0.10]", "addresses: [10.0.0.256]"),
         "c.yaml:4:16: '10.0.0.256' is not an IP address; fix: give a list, a range '10.0.0.11-26' or '10.0.0.[11-26]'",),
    case('count-mismatch',
         GOOD.replace("10.0.0.[11-12]", "10.0.0.[11-13]"),
         "c.yaml:7:16: 2 names (gpu[01-02]) but 3 addresses (got '10.0.0.[11-13]'); fix: give exactly one address per name, in the same order",),
    case('duplicate-names-across-groups',
         GOOD.replace("names: ctl1", "names: gpu02"),
         "c.yaml:6:12: duplicate node name: used 2 times (got 'gpu02'); fix: give every node a unique node name",),
    case('duplicate-addresses',
         GOOD.replace("addresses: [10.0.0.10]", "addresses: [10.0.0.12]"),
         "c.yaml:7:16: duplicate address: used 2 times (got '10.0.0.12'); fix: give every node a unique address",),
    case('missing-controller',
         GOOD.replace("roles: [controller]", "roles: [login]"),
         "c.yaml:3:3: no node has the 'controller' role; fix: add 'controller' to the roles of a node group",),
    case('missing-compute',
         GOOD.replace("roles: [compute]", "roles: [login]").replace("  partitions:\n    - name: gpu\n      nodes: gpu[01-02]\n      default: true\n      qos: normal\n", ""),
         "c.yaml:3:3: no node has the 'compute' role; fix: add 'compute' to the roles of a node group",),
    case('control-plane-in-slurm',
         GOOD.replace("roles: [controller]", "roles: [controller, control-plane]"),
         "c.yaml:5:12: role 'control-plane' does not exist for scheduler 'slurm' (got 'control-plane'); fix: use roles from: controller, compute, login, accounting, monitoring, nfs",),
    case('controller-in-kubernetes',
         "name: k\nscheduler: kubernetes\nnodes:\n  - names: cp1\n    addresses: 10.0.0.1\n    roles: [controller]\n  - names: w1\n    addresses: 10.0.0.2\n    roles: [worker]\n",
         "c.yaml:6:12: role 'controller' does not exist for scheduler 'kubernetes' (got 'controller'); fix: use roles from: control-plane, worker, monitoring, nfs",),
    case('override-role-of-other-scheduler',
         GOOD.replace("    gpus: {model: h100, count: 4}\n", "    gpus: {model: h100, count: 4}\n    overrides:\n      gpu02: {roles: [worker]}\n"),
         "c.yaml:11:22: role 'worker' does not exist for scheduler 'slurm' (got 'worker'); fix: use roles from: controller, compute, login, accounting, monitoring, nfs",
         "c.yaml:15:14: partition 'gpu': node 'gpu02' is not a compute node (got 'gpu02'); fix: did you mean 'gpu01'?",),
    case('duplicate-role',
         GOOD.replace("roles: [compute]", "roles: [compute, compute]"),
         "c.yaml:8:12: role listed twice (got 'compute'); fix: list each role once",),
    case('three-controllers',
         GOOD.replace("names: ctl1\n    addresses: [10.0.0.10]", "names: ctl[1-3]\n    addresses: 10.0.0.[1-3]"),
         "c.yaml:5:12: more than 2 controllers (Slurm supports one primary and one backup) (got 'ctl[1-3]'); fix: give the controller role to at most 2 nodes",),
    case('two-accounting',
         GOOD.replace("roles: [controller]", "roles: [controller, accounting]").replace("roles: [compute]", "roles: [compute, accounting]"),
         "c.yaml:3:3: 3 nodes have the 'accounting' role (at most 1) (got 'ctl1,gpu01,gpu02'); fix: give 'accounting' to at most 1 node(s)",),
    case('gpus-without-job-role',
         GOOD.replace("    roles: [controller]\n", "    roles: [controller]\n    gpus: {model: h100, count: 1}\n"),
         "c.yaml:6:11: GPUs declared on nodes that run no jobs (got ['controller']); fix: add the 'compute' role (or 'worker' on Kubernetes) or drop 'gpus'",),
    case('override-gpus-without-job-role',
         GOOD.replace("    roles: [controller]\n", "    roles: [controller]\n    overrides:\n      ctl1: {gpus: {model: h100, count: 2}}\n"),
         "c.yaml:7:13: node 'ctl1': GPUs declared on a node that runs no jobs (got ['controller']); fix: add the 'compute' role (or 'worker' on Kubernetes) or drop 'gpus'",),
    case('override-gpus-need-model',
         GOOD.replace("    roles: [controller]\n", "    roles: [controller]\n    overrides:\n      ctl1: {gpus: {count: 2}}\n"),
         "c.yaml:7:20: GPU override on a group without gpus needs 'model' and 'count' (got {'count': 2}); fix: add model: and count:",),
    case('partition-unknown-node',
         GOOD.replace("nodes: gpu[01-02]", "nodes: gpu[01-03]"),
         "c.yaml:13:14: partition 'gpu': node 'gpu03' does not exist in the spec (got 'gpu03'); fix: did you mean 'gpu02'?",),
    case('partition-non-compute-node',
         GOOD.replace("nodes: gpu[01-02]", "nodes: ctl1"),
         "c.yaml:13:14: partition 'gpu': node 'ctl1' is not a compute node (got 'ctl1'); fix: choose from: gpu01, gpu02",),
    case('partition-bad-hostlist',
         GOOD.replace("nodes: gpu[01-02]", "nodes: gpu[01-"),
         "c.yaml:13:14: bad hostlist 'gpu[01-': unbalanced brackets; fix: use a hostlist or ALL",),
    case('partition-unknown-qos',
         GOOD.replace("qos: normal", "qos: nromal"),
         "c.yaml:15:12: partition 'gpu': unknown QOS (got 'nromal'); fix: did you mean 'normal'?",),
    case('two-default-partitions',
         GOOD.replace("      qos: normal\n", "      qos: normal\n    - name: debug\n      default: true\n"),
         "c.yaml:12:5: more than one default partition; fix: set 'default: true' on one partition only",),
    case('duplicate-partition',
         GOOD.replace("      qos: normal\n", "      qos: normal\n    - name: gpu\n"),
         "c.yaml:11:3: duplicate partition name (got 'gpu'); fix: give every partition a unique name",),
    case('qos-preempts-unknown',
         GOOD.replace("    - name: high\n", "    - name: high\n      preempt: [norma]\n"),
         "c.yaml:19:16: QOS 'high' preempts an unknown QOS (got 'norma'); fix: did you mean 'normal'?",),
    case('qos-preempts-itself',
         GOOD.replace("    - name: high\n", "    - name: high\n      preempt: [high]\n"),
         "c.yaml:19:16: QOS 'high' cannot preempt itself (got 'high'); fix: remove 'high' from its 'preempt' list",),
    case('account-unknown-parent-and-qos',
         GOOD + "  accounts:\n    - name: research\n    - name: vision\n      parent: reserch\n      qos: [hihg]\n",
         "c.yaml:22:15: account 'vision': unknown parent (got 'reserch'); fix: did you mean 'research'?",
         "c.yaml:23:12: account 'vision': unknown QOS (got 'hihg'); fix: did you mean 'high'?",),
    case('account-default-qos-not-listed',
         GOOD + "  accounts:\n    - name: research\n      qos: [high]\n      default_qos: normal\n",
         "c.yaml:22:20: default_qos is not in the account's qos list (got 'normal'); fix: add it to 'qos'",),
    case('override-not-in-group',
         GOOD.replace("    gpus: {model: h100, count: 4}\n", "    gpus: {model: h100, count: 4}\n    overrides:\n      gpu03: {memory_mb: 1024}\n"),
         "c.yaml:11:7: override for 'gpu03', which is not in this group (gpu[01-02]) (got 'gpu03'); fix: name a node of this group",),
    case('yaml-tab',
         GOOD.replace("    roles: [controller]\n", "\troles: [controller]\n"),
         "c.yaml:5:1: invalid YAML: found character '\\t' that cannot start any token (while scanning for the next token); fix: correct the YAML syntax at that position",),
    case('yaml-unclosed-bracket',
         GOOD.replace("roles: [controller]", "roles: [controller"),
         "c.yaml:6:10: invalid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence at line 5, column 12); fix: correct the YAML syntax at that position",),
    case('yaml-unclosed-quote',
         GOOD.replace("name: lab", "name: 'lab"),
         'c.yaml:19:1: invalid YAML: found unexpected end of stream (while scanning a quoted scalar at line 1, column 7); fix: correct the YAML syntax at that position',),
    case('yaml-duplicate-key',
         GOOD.replace("    roles: [compute]\n", "    roles: [compute]\n    roles: [login]\n"),
         'c.yaml:9:5: invalid YAML: found duplicate key "roles" with value "[\'login\']" (original value: "[\'compute\']") (while constructing a mapping at line 6, column 5); fix: correct the YAML syntax at that position',),
    case('yaml-bad-indent',
         GOOD.replace("    roles: [controller]\n", "     roles: [controller]\n"),
         "c.yaml:5:6: invalid YAML: expected <block end>, but found '<block mapping start>' (while parsing a block mapping at line 3, column 5); fix: correct the YAML syntax at that position",),
    case('yaml-undefined-alias',
         GOOD.replace("roles: [compute]", "roles: *compute"),
         "c.yaml:8:12: invalid YAML: found undefined alias 'compute'; fix: correct the YAML syntax at that position",),
    case('yaml-two-documents',
         GOOD + "---\nname: other\n",
         'c.yaml:19:1: invalid YAML: found another document (expected a single document in the stream at line 1, column 1); fix: correct the YAML syntax at that position',),
    case('yaml-nul-char',
         GOOD.replace("name: lab", "name: l\x00ab"),
         'c.yaml:1:8: invalid YAML: unacceptable character #x0000: special characters are not allowed; fix: remove the character or quote it as an escape',),
    case('yaml-bad-int-tag',
         GOOD.replace("count: 4", "count: !!int four"),
         "c.yaml:9:32: invalid YAML value: invalid literal for int() with base 10: 'four'; fix: write a plain value (quote it to make it a string)",),
    case('yaml-bad-date',
         GOOD.replace("name: lab", "name: 2024-13-01"),
         'c.yaml:1:7: invalid YAML value: month must be in 1..12; fix: write a plain value (quote it to make it a string)',),
    case('yaml-too-deep',
         "name: " + "[" * 100 + "]" * 100 + "\n",
         'c.yaml:1:70: invalid YAML: nested deeper than 64 levels; fix: flatten the structure',),
    case('yaml-billion-laughs',
         LAUGHS,
         'c.yaml:5:29: the file expands to more than 100000 values through its aliases; fix: write the values out instead of nesting aliases, or raise CORRAL_MAX_YAML_VALUES (now 100000)',),
    case('top-level-list',
         "- name: lab\n- nodes: []\n",
         "c.yaml:1:1: the spec must be a mapping of keys to values (got 'list'); fix: start with 'name: mycluster' and 'nodes:'",),
    case('top-level-scalar',
         "lab\n",
         "c.yaml:1:1: the spec must be a mapping of keys to values (got 'str'); fix: start with 'name: mycluster' and 'nodes:'",),
    case('top-level-number',
         "42\n",
         "c.yaml:1:1: the spec must be a mapping of keys to values (got 'int'); fix: start with 'name: mycluster' and 'nodes:'",),
    case('empty-file',
         "",
         "c.yaml:1:1: the spec file is empty; fix: start with 'name: mycluster' and 'nodes:'",),
    case('only-comments',
         "# just a comment\n\n",
         "c.yaml:1:1: the spec file is empty; fix: start with 'name: mycluster' and 'nodes:'",),
    case('no-nodes',
         "name: lab\nnodes: []\n",
         'c.yaml:2:8: nodes: needs at least 1 item(s) (got []); fix: give at least 1 item(s)',),
    case('virtual-address-outside-subnet',
         GOOD + "virtual:\n  subnet: 10.0.0.0/29\n",
         "c.yaml:4:16: node ctl1: address not usable in virtual subnet 10.0.0.0/29 (10.0.0.1 is the host side) (got '10.0.0.10'); fix: use addresses from 10.0.0.2 to 10.0.0.6",
         "c.yaml:7:16: node gpu01: address not usable in virtual subnet 10.0.0.0/29 (10.0.0.1 is the host side) (got '10.0.0.11'); fix: use addresses from 10.0.0.2 to 10.0.0.6",
         "c.yaml:7:16: node gpu02: address not usable in virtual subnet 10.0.0.0/29 (10.0.0.1 is the host side) (got '10.0.0.12'); fix: use addresses from 10.0.0.2 to 10.0.0.6",),
    case('virtual-subnet-too-small',
         GOOD + "virtual:\n  subnet: 10.0.0.0/30\n",
         "c.yaml:20:11: subnet too small (got '10.0.0.0/30'); fix: use a /24",),
    case('virtual-subnet-public',
         GOOD.replace("10.0.0.", "8.8.8.") + "virtual:\n  subnet: 8.8.8.0/24\n",
         "c.yaml:20:11: virtual subnet must be a private range (got '8.8.8.0/24'); fix: use e.g. 10.213.0.0/24",),
    case('virtual-subnet-host-bits',
         GOOD + "virtual:\n  subnet: 10.0.0.1/24\n",
         "c.yaml:20:11: virtual.subnet: must be an IPv4 network (address/prefix) (got '10.0.0.1/24'); fix: give a network address with its prefix length, e.g. 10.213.0.0/24",),
]


def errors_of(text: str, path: str = "c.yaml") -> SpecError:
    with pytest.raises(SpecError) as err:
        load_text(text, path)
    return err.value


def test_good_spec_loads():
    assert [n.name for n in load_text(GOOD, "c.yaml").nodes] == ["ctl1", "gpu01", "gpu02"]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_golden_message(text, expected):
    assert text != GOOD, "the edit did not apply: GOOD changed?"
    err = errors_of(text)
    assert str(err).split("\n") == expected
    assert len(err.problems) == len(expected)
    for problem, line in zip(err.problems, expected):
        assert LOCATED.match(problem.where), problem.where
        assert str(problem) == line
    assert isinstance(err, CorralError) and err.exit_code == 2
    # the first problem is also the error's own message/location
    assert (err.where, err.message) == (err.problems[0].where, err.problems[0].message)


def test_problem_fields():
    err = errors_of(GOOD.replace("count: 4", "count: -1"))
    assert err.problems == [Problem(
        where="c.yaml:9:32",
        message="nodes.1.gpus.count: must be at least 0",
        value=-1,
        fix="use a value in the allowed range",
    )]
    err = errors_of(GOOD.replace("nodes: gpu[01-02]", "nodes: gpu[01-03]"))
    assert err.problems == [Problem("c.yaml:13:14", "partition 'gpu': node 'gpu03' does not exist in the spec",
                                    "gpu03", "did you mean 'gpu02'?")]


def test_path_is_used_in_locations():
    err = errors_of(GOOD.replace("count: 4", "count: -1"), "/etc/corral/cluster.yaml")
    assert err.problems[0].where == "/etc/corral/cluster.yaml:9:32"


def test_several_schema_problems_are_all_reported_in_file_order():
    path = FIXTURES / "many_problems.yaml"
    with pytest.raises(SpecError) as err:
        load(path)
    assert [(p.where.removeprefix(f"{path}:"), p.message) for p in err.value.problems] == [
        ("2:7", "name: does not have the expected form"),
        ("3:1", "unknown key 'schedular'"),
        ("6:3", "unknown key 'ssh.prot'"),
        ("11:32", "nodes.0.gpus.count: must be at least 0"),
        ("15:32", "nodes.1.gpus.count: must be a whole number"),
        ("19:17", "slurm.partitions.0.max_time: not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], "
                  "INFINITE or UNLIMITED)"),
    ]
    assert len(str(err.value).splitlines()) == 6


def test_several_cross_field_problems_are_all_reported():
    text = GOOD.replace(
        "names: ctl1", "names: gpu02").replace(   # duplicate name (and so no controller check)
        "qos: normal", "qos: nromal").replace(     # unknown QOS
        "    - name: high\n", "    - name: high\n      preempt: [low]\n") + (
        "  accounts:\n    - name: a\n      parent: b\n")
    assert str(errors_of(text)).split("\n") == [
        "c.yaml:6:12: duplicate node name: used 2 times (got 'gpu02'); fix: give every node a unique node name",
        "c.yaml:15:12: partition 'gpu': unknown QOS (got 'nromal'); fix: did you mean 'normal'?",
        "c.yaml:19:16: QOS 'high' preempts an unknown QOS (got 'low'); fix: choose from: normal",
        "c.yaml:22:15: account 'a': unknown parent (got 'b'); fix: choose from: a",
    ]


def test_several_groups_with_expansion_problems_are_all_reported():
    text = GOOD.replace("names: ctl1", "names: ctl[1-").replace("10.0.0.[11-12]", "10.0.0.[11-13]")
    assert str(errors_of(text)).split("\n") == [
        "c.yaml:3:12: bad hostlist 'ctl[1-': unbalanced brackets; fix: write names like 'gpu[01-16]' or 'ctl1,login1'",
        "c.yaml:7:16: 2 names (gpu[01-02]) but 3 addresses (got '10.0.0.[11-13]'); "
        "fix: give exactly one address per name, in the same order",
    ]


def test_one_line_per_problem_even_for_yaml_errors():
    for text in ("a: 'x\n", "a: [\n", "\x00", "a: b: c\n", "? - [\n", "a: !!binary '@'\n"):
        err = errors_of(text)
        assert len(str(err).splitlines()) == len(err.problems)
        assert all(LOCATED.match(p.where) for p in err.problems)


@pytest.mark.parametrize("bad", [
    "name: lab\nnodes: gpu01\n", "name: lab\nnodes: []\n", "name: [x]\nnodes: [{names: a, addresses: 10, roles: x}]\n",
    "name: lab\nnodes:\n  - {names: a, addresses: [1.2.3.999], roles: [compute], gpus: {model: h100, count: x}}\n",
    "name: lab\nhealth: {interval_s: 1, mounts: 5}\nnodes: [{names: a, addresses: [10.0.0.1], roles: [compute]}]\n",
    "name: lab\nmonitoring: {listen: everywhere, alerts: {for_s: -1}}\nnodes: [{names: a, addresses: [10.0.0.1], roles: [compute]}]\n",
])
def test_pydantic_wording_never_reaches_the_user(bad):
    from corral.spec.loader import load_text
    with pytest.raises(SpecError) as err:
        load_text(bad, "c.yaml")
    text = str(err.value)
    assert not any(w in text for w in ("Input should", "String should", "Value error", "List should",
                                       "Input is not", "validation error")), text
