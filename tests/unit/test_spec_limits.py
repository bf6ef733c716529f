"""Denial of service from small inputs: each finding reproduced as it was, now refused (or done) fast.

Every input here used to take from seconds to minutes (and up to gigabytes). The timing bounds are
generous guards, far above what the fixed code needs and far below what the old code took: the
point is that nothing is expanded, read or walked before it is counted."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from corral import limits
from corral.errors import SpecError, UsageError
from corral.spec import loader
from corral.importers.deepops import import_deepops
from corral.importers.deepops_inventory import Inventory, parse_inventory
from corral.importers.deepops_limits import count_pattern, expand_pattern
from corral.spec.hosts import RangeError, count_addresses, count_names, expand_names
from corral.spec.loader import load, load_text

FAST = 2.0  # seconds; the old code took 20 s to several minutes on each of these inputs
LOCATED = re.compile(r"^\S+?(:\d+){0,2}: \S")  # file:line:col (cluster.yaml), file:line or file (DeepOps)

MINIMAL = "name: lab\nnodes:\n  - names: ctl1\n    addresses: 10.0.0.1\n    roles: &r [controller, compute]\n"


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.start


def refused(fn, *args, bound: float = FAST, **kwargs) -> SpecError:
    """fn(*args) raises SpecError within `bound` seconds; the error is one located line per problem."""
    with Timer() as t, pytest.raises(SpecError) as err:
        fn(*args, **kwargs)
    assert t.seconds < bound, f"took {t.seconds:.1f} s"
    assert all("\n" not in str(p) and LOCATED.match(str(p)) for p in err.value.problems)
    return err.value


def laughs(levels: int, prefix: str = "") -> str:
    """A billion-laughs YAML: each level is 9 aliases of the one before (9**levels values)."""
    names = "abcdefghijklmnop"[:levels + 1]
    lines = [f"{prefix}{names[0]}: &{names[0]} [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    lines += [f"{prefix}{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]" for p, c in zip(names, names[1:])]
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def default_limits(monkeypatch):
    for f in limits.Limits.__dataclass_fields__:
        monkeypatch.delenv(limits.env_var(f), raising=False)


# --- limits.py --------------------------------------------------------------------------------


def test_limits_defaults_and_environment(monkeypatch):
    assert limits.current() == limits.DEFAULTS
    assert (limits.DEFAULTS.max_nodes, limits.DEFAULTS.max_spec_bytes) == (100_000, 10 * 1024 * 1024)
    monkeypatch.setenv("CORRAL_MAX_NODES", "250")
    monkeypatch.setenv("CORRAL_MAX_YAML_ALIASES", "1_000")
    assert (limits.current().max_nodes, limits.current().max_yaml_aliases) == (250, 1000)
    assert limits.raise_hint("max_nodes") == "raise CORRAL_MAX_NODES (now 250)"
    for f in limits.Limits.__dataclass_fields__:  # every limit is documented with its variable
        assert limits.env_var(f) in limits.__doc__


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_limit_in_the_environment_is_a_usage_error(monkeypatch, value):
    monkeypatch.setenv("CORRAL_MAX_NODES", value)
    with pytest.raises(UsageError, match="CORRAL_MAX_NODES must be a positive integer"):
        load_text(MINIMAL)


# --- node count: per spec, counted before expanding ---------------------------------------------


def thirty_groups(names: str) -> str:
    groups = "".join(f"  - names: {names.format(i=i)}\n    addresses: 10.{i}.0.1-10.{i + 100}.134.160\n"
                     "    roles: [compute]\n" for i in range(30))
    return "name: lab\nnodes:\n" + groups


@pytest.mark.parametrize("names", ["g[0-99999]", "g{i:02d}x[0-99999]"])
def test_thirty_groups_of_100k_names_are_refused_before_expanding(names):
    text = thirty_groups(names)  # the finding: 2.6 KB, 3 M nodes, used to take 39 s and 2 GB
    assert len(text) < 3000
    err = refused(load_text, text, "c.yaml")
    [problem] = err.problems
    assert problem.where == "c.yaml:6:12"  # the `names` of the group that goes over: the second
    assert str(problem) == ("c.yaml:6:12: more than 100000 nodes in the spec: the groups up to this one name "
                            f"200000 (got {names.format(i=1)!r}); fix: split the cluster or raise "
                            "CORRAL_MAX_NODES (now 100000)")


def test_one_group_over_the_limit_is_refused_before_expanding():
    text = MINIMAL + "  - names: a[0-99999],b[0-99999]\n    addresses: 10.1.0.0/16\n    roles: [compute]\n"
    err = refused(load_text, text, "c.yaml")
    assert err.problems[0].where == "c.yaml:6:12" and "the groups up to this one name 200001" in str(err)


def spec_of(n_compute: int) -> str:
    return MINIMAL + (f"  - names: gpu[1-{n_compute}]\n    addresses: 10.1.0.1-10.1.0.{n_compute}\n"
                      "    roles: [compute]\n")


def test_a_spec_exactly_at_the_limit_loads(monkeypatch):
    monkeypatch.setenv("CORRAL_MAX_NODES", "20")
    assert len(load_text(spec_of(19)).nodes) == 20  # ctl1 + gpu[1-19]
    err = refused(load_text, spec_of(20), "c.yaml")
    assert str(err).startswith("c.yaml:6:12: more than 20 nodes in the spec: the groups up to this one "
                               "name 21 (got 'gpu[1-20]'); fix: split the cluster or raise CORRAL_MAX_NODES")


def test_counting_matches_expanding():
    for expr in ("gpu[01-16]", "r[1-2]n[1-3],login1", "a[1-3,7,9-10]b[01-02]", "x,y,,z", "[1-2]"):
        assert count_names(expr) == len(expand_names(expr)), expr
    assert count_addresses("10.0.[0-1].[1-3]") == 6 and count_addresses("10.0.0.11-26") == 16
    assert count_addresses(["10.0.0.1", "10.0.0.2"]) == 2 and count_addresses("10.0.0.1,10.0.0.2") == 2
    assert count_names("g[0-99999]," * 30) == 3_000_000  # counted, not expanded
    with pytest.raises(RangeError, match="bad range"):
        count_names("gpu[a-b]")


def test_many_ranges_in_one_bracket_are_counted_before_expanding():
    # python-hostlist checks each range but expands a whole [...] before checking its total size
    with Timer() as t, pytest.raises(RangeError, match="results too large"):
        expand_names("g[" + ",".join(["0-99999"] * 30) + "]")
    assert t.seconds < FAST


def test_a_duplicate_name_at_the_end_of_a_long_list_is_found_fast():
    with Timer() as t, pytest.raises(RangeError, match="names 'g99998' more than once"):
        expand_names("g[0-99998],g99998", unique=True)  # used to compare each name with all before it
    assert t.seconds < FAST


def test_address_count_mismatch_is_reported_without_expanding():
    text = MINIMAL.replace("addresses: 10.0.0.1", "addresses: 10.0.[0-255].[0-255],10.1.[0-255].[0-255]")
    err = refused(load_text, text, "c.yaml")
    assert err.problems[0].where == "c.yaml:4:16" and "1 names (ctl1) but 131072 addresses" in str(err)


# --- cluster.yaml size, before parsing ----------------------------------------------------------


def test_an_11_mib_cluster_yaml_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    target = tmp_path / "cluster.yaml"
    target.write_text(MINIMAL + "list:\n" + "  - 10.0.0.1\n" * (11 * 1024 * 1024 // 13))
    monkeypatch.setattr(loader, "parse_yaml", lambda *a: pytest.fail("parsed"))
    err = refused(load, target)
    size = target.stat().st_size
    assert str(err) == (f"{target}:1:1: the spec file is larger than 10485760 bytes (got {size}); "
                        "fix: split the cluster or raise CORRAL_MAX_SPEC_BYTES (now 10485760)")
    err = refused(load_text, target.read_text(), "c.yaml")  # text given directly: measured too
    assert err.problems[0].where == "c.yaml:1:1" and "larger than 10485760 bytes" in str(err)


def test_spec_size_limit_override_and_a_device_that_never_ends(monkeypatch):
    monkeypatch.setenv("CORRAL_MAX_SPEC_BYTES", "1000")
    assert load_text(MINIMAL).name == "lab"
    assert "larger than 1000 bytes" in str(refused(load_text, MINIMAL + "#" * 1000 + "\n"))
    if Path("/dev/zero").exists():  # a size of 0 that reads forever: read one byte past the limit
        err = refused(load, "/dev/zero")
        assert str(err).startswith("/dev/zero:1:1: the spec file is larger than 1000 bytes (got 1001)")


# --- YAML aliases ("billion laughs") ------------------------------------------------------------


def test_billion_laughs_cluster_yaml_is_refused_while_composing():
    err = refused(load_text, MINIMAL + laughs(9, "x"), "c.yaml")  # 9**10 values in 400 bytes
    [problem] = err.problems
    assert str(problem) == ("c.yaml:11:9: the file expands to more than 100000 values through its aliases; "
                            "fix: write the values out instead of nesting aliases, or raise "
                            "CORRAL_MAX_YAML_VALUES (now 100000)")


def aliased_groups(aliases: int) -> str:
    groups = [f"  - names: a{i}\n    addresses: 10.0.1.{i}\n    roles: [compute]\n    gpus: *g\n"
              for i in range(aliases + 1)]
    return MINIMAL + groups[0].replace("*g", "&g {model: h100, count: 1}") + "".join(groups[1:])


def test_too_many_aliases_are_refused(monkeypatch):
    assert len(load_text(aliased_groups(3)).nodes) == 5  # a few small aliases still load
    monkeypatch.setenv("CORRAL_MAX_YAML_ALIASES", "3")
    assert len(load_text(aliased_groups(3)).nodes) == 5
    err = refused(load_text, aliased_groups(4), "c.yaml")
    assert str(err) == ("c.yaml:25:11: the file has more than 3 aliases; fix: write the values out instead "
                        "of using so many aliases, or raise CORRAL_MAX_YAML_ALIASES (now 3)")


def test_a_long_value_repeated_through_aliases_is_refused():
    # few values, but each alias stands for 100 KB of text: printing them would print 20 MB
    text = MINIMAL.replace("[controller, compute]", f"[controller, compute, {'x' * 100_000}]")
    text += "".join(f"  - names: a{i}\n    addresses: 10.0.1.{i}\n    roles: *r\n" for i in range(200))
    err = refused(load_text, text, "c.yaml")
    assert str(err) == ("c.yaml:317:12: the file expands to more than 10485760 characters through its aliases; "
                        "fix: write the values out instead of repeating long aliased values, or raise "
                        "CORRAL_MAX_SPEC_BYTES (now 10485760)")


# --- corral import deepops ----------------------------------------------------------------------


def config(tmp_path: Path, inventory: str, **files: str) -> Path:
    cfg = tmp_path / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "inventory").write_text(inventory)
    for rel, text in files.items():
        (cfg / rel).parent.mkdir(parents=True, exist_ok=True)
        (cfg / rel).write_text(text)
    return cfg


def big_inventory(n: int) -> str:
    hosts = "".join(f"gpu{i} ansible_host=10.{i >> 16}.{(i >> 8) & 255}.{i & 255}\n" for i in range(n + 1))
    return f"[all]\nhead ansible_host=10.255.0.1\n{hosts}[slurm-master]\nhead\n[slurm-node]\ngpu[0:{n}]\n"


def timed_import(cfg: Path) -> float:
    with Timer() as t:
        import_deepops(cfg)
    return t.seconds


def test_deepops_import_of_20000_hosts_is_fast(tmp_path):
    # the finding: 35 s for gpu[0:20000], over 300 s for 60000 (each host walked every group)
    cfg = config(tmp_path, big_inventory(20000))
    with Timer() as t:
        result = import_deepops(cfg)
    assert t.seconds < 20, f"took {t.seconds:.1f} s"
    assert 'names: "gpu[0-20000]"' in result.yaml_text
    # a range with no addresses: one problem per host, found as fast
    bare = config(tmp_path / "bare",
                  "[slurm-master]\nhead ansible_host=10.0.0.1\n[slurm-node]\ngpu[0:20000]\n")
    err = refused(import_deepops, bare, bound=10)
    assert len(err.problems) == 20001 and "has no ansible_host" in err.problems[-1].message


def test_deepops_import_is_not_quadratic(tmp_path):
    small, large = config(tmp_path / "s", big_inventory(2000)), config(tmp_path / "l", big_inventory(8000))
    ratio = min(timed_import(large) for _ in range(2)) / min(timed_import(small) for _ in range(2))
    assert ratio < 10, f"4x the hosts took {ratio:.1f}x the time (quadratic: 16x)"


@pytest.mark.parametrize("host", ["gpu[0:99999999]", "n[0:999][0:999]", "gpu[0:100000]"])
def test_an_over_limit_ansible_range_is_refused_before_expanding(tmp_path, host):
    cfg = config(tmp_path, f"[slurm-master]\nhead ansible_host=10.0.0.1\n[slurm-node]\n{host}\n")
    err = refused(import_deepops, cfg)
    assert str(err) == (f"{cfg}/inventory:4: more than 100000 hosts in the inventory (got {host!r}); fix: "
                        "import a smaller inventory or raise CORRAL_MAX_IMPORT_HOSTS (now 100000)")


def test_import_host_limit_exactly_and_over(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_MAX_IMPORT_HOSTS", "100")
    ok = config(tmp_path / "ok", "[slurm-node]\nn[1:99]\n[slurm-master]\nhead\n")
    inv = Inventory(base=ok, path=ok / "inventory")
    parse_inventory(inv, [])
    assert len(inv.hosts) == 100
    over = config(tmp_path / "over", "[slurm-node]\nn[1:99]\n[slurm-master]\nhead\nhead2\n")
    err = refused(import_deepops, over)
    assert err.problems[0].where == f"{over}/inventory:5" and "more than 100 hosts" in str(err)


def test_naming_hosts_again_and_again_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_MAX_IMPORT_HOSTS", "10")  # so 10 * 10 mentions in all
    groups = "".join(f"[g{i}]\nn[1:10]\n" for i in range(11))
    err = refused(import_deepops, config(tmp_path, groups))
    assert err.problems[0].where.endswith("inventory:22") and "names hosts more than 100 times" in str(err)


def test_import_group_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_MAX_IMPORT_GROUPS", "5")  # 'all' and 'ungrouped' count too
    err = refused(import_deepops, config(tmp_path, "[a]\n[b]\n[c:children]\nd\n"))
    assert str(err) == (f"{tmp_path}/config/inventory:4: more than 5 groups in the inventory (got 'd'); fix: "
                        "import a smaller inventory or raise CORRAL_MAX_IMPORT_GROUPS (now 5)")


def test_ansible_ranges_counted_like_expanded():
    for name in ("gpu[01:04]", "n[a:c]x", "n[0:10:3]", "r[1:2]n[01:03]", "plain"):
        assert count_pattern(name) == len(expand_pattern(name)), name
    assert expand_pattern("r[1:2]n[1:2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert count_pattern("n[0:99999999999]") == 100_000_000_000  # counted, not expanded
    for bad in ("n[5:1]", "n[0:9]]", "n[[0:1]:9]", "n[0:" + "9" * 5000 + "]"):
        with pytest.raises(ValueError):
            count_pattern(bad)


def test_billion_laughs_group_vars_is_refused_naming_the_file(tmp_path):
    # the finding: a 400-byte group_vars file grew to 9.7 GB in 120 s
    cfg = config(tmp_path, big_inventory(10), **{"group_vars/all.yml": laughs(9) + "ansible_user: *j\n"})
    err = refused(import_deepops, cfg)
    [problem] = err.problems
    assert str(problem) == (f"{cfg}/group_vars/all.yml:6: the file expands to more than 100000 values "
                            "through its aliases; fix: write the values out instead of nesting aliases, "
                            "or raise CORRAL_MAX_YAML_VALUES (now 100000)")


def test_import_bytes_limit(tmp_path, monkeypatch):
    cfg = config(tmp_path, "[all]\n" + "#" * (11 * 1024 * 1024) + "\n")
    err = refused(import_deepops, cfg)
    assert str(err).startswith(f"{cfg}/inventory: the DeepOps config files are larger than 10485760 bytes in "
                               "all (got ")
    assert str(err).endswith("fix: remove files the import does not need or raise CORRAL_MAX_IMPORT_BYTES "
                             "(now 10485760)")
    monkeypatch.setenv("CORRAL_MAX_IMPORT_BYTES", "200")  # the inventory and vars files together
    inventory = "[slurm-master]\nh ansible_host=10.0.0.1\n[slurm-node]\nn ansible_host=10.0.0.2\n"
    small = config(tmp_path / "b", inventory, **{"group_vars/all.yml": "x: " + "y" * 150 + "\n"})
    err = refused(import_deepops, small)
    assert err.problems[0].where == f"{small}/group_vars/all.yml" and "(got 230)" in str(err)
