"""Backup rotation (corral/backup/rotation.py: backups_of, rotate) in a directory shared by clusters:
only this cluster's exactly-named files are ever removed, never the file just written."""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from corral.backup import archive, rotation
from corral.spec.models_slurm import NAME

DAY = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)


def _files(directory: Path, cluster: str, days: range) -> list[Path]:
    out = []
    for d in days:
        p = directory / rotation.backup_name(cluster, DAY + datetime.timedelta(days=d))
        p.write_bytes(b"x")
        out.append(p)
    return out


def test_backing_up_lab_keeps_its_new_file_and_never_touches_lab_prod(tmp_path: Path) -> None:
    """Reproduced: `lab-*` matched lab-prod's files, which sort after lab's, so lab's newest
    (the file just written) was removed and lab-prod's were counted as lab's."""
    prod = _files(tmp_path, "lab-prod", range(0, 2))
    lab_old, lab_new = _files(tmp_path, "lab", range(2, 4))
    removed = rotation.rotate(tmp_path, "lab", 1, written=lab_new)
    assert removed == [lab_old]
    assert lab_new.exists() and all(p.exists() for p in prod)


def test_only_exact_names_count_not_lookalikes(tmp_path: Path) -> None:
    (real,) = _files(tmp_path, "lab", range(1))
    lookalikes = [f"lab-{'x' * 16}{archive.SUFFIX}", f"lab-20261201T000000Z{archive.SUFFIX}.bak",
                  f"lab-20261201T000000Z-1{archive.SUFFIX}", f"lab-2026-12-01{archive.SUFFIX}",
                  f".lab-20261201T000000Z{archive.SUFFIX}.partial"]
    for name in lookalikes:
        (tmp_path / name).write_bytes(b"x")
    assert rotation.backups_of(tmp_path, "lab") == [real]
    rotation.rotate(tmp_path, "lab", 1)
    assert all((tmp_path / name).exists() for name in lookalikes)


def test_the_file_just_written_stays_even_when_it_looks_oldest(tmp_path: Path) -> None:
    """A clock stepped back: the new file's stamp is older than the ones already there."""
    (first,) = _files(tmp_path, "lab", range(0, 1))
    _files(tmp_path, "lab", range(5, 7))
    assert first not in rotation.rotate(tmp_path, "lab", 1, written=first) and first.exists()


# the spec's own pattern for cluster names (spec/models_slurm.py NAME), biased to prefixes of each other
names = st.from_regex(NAME, fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(a=names, suffix=st.from_regex(r"[a-z0-9_-]{1,8}", fullmatch=True), other=names,
       n_a=st.integers(0, 4), n_b=st.integers(0, 4), keep=st.integers(1, 4))
def test_rotation_never_removes_another_clusters_file_nor_the_new_one(a, suffix, other, n_a, n_b, keep) -> None:
    b = other if other != a else a + "x"
    b_prefixed = (a + suffix)[:63] if (a + suffix)[:63] != a else a + "-"  # lab / lab-prod, lab / lab_2 ...
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        others = _files(d, b, range(0, n_b)) + _files(d, b_prefixed, range(10, 10 + n_b))
        mine = _files(d, a, range(20, 21 + n_a))  # the last one is the file just written
        removed = rotation.rotate(d, a, keep, written=mine[-1])
        assert all(p.exists() for p in others)
        assert mine[-1].exists() and set(removed) == set(mine[:-keep]) and set(removed) <= set(mine)
        assert sorted(rotation.backups_of(d, a)) == mine[-keep:]
