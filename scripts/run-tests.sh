#!/usr/bin/env bash
# The test suite as CI runs it (`bash scripts/bootstrap.sh test` installs what it needs, then runs this).
# First the type check: mypy over the contracts (pyproject.toml [tool.mypy]: components, engine, workflows, checks;
# seconds). Then the unit tests, as one pytest process per core at once (pytest-split, least_duration: each takes
# every Nth test, so a slow file is spread over all of them); their output is printed as each ends. Then the
# virtual-cluster tests in one process, one at a time (they share clusters and bridges), with the 25
# slowest listed: where CI time goes. Every part runs even when an earlier one failed; any failure fails it.
set -uo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
n=$(nproc); [ "$n" -gt 8 ] && n=8
logs=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$logs"' EXIT
rc=0
echo "== type check (mypy)"
"$py" -m mypy || rc=1
for g in $(seq "$n"); do
  "$py" -m pytest -q -p no:cacheprovider --splits "$n" --group "$g" --splitting-algorithm least_duration \
    tests --ignore=tests/vcluster >"$logs/unit-$g.log" 2>&1 &
  pids+=($!)
done
for g in $(seq "$n"); do
  wait "${pids[$((g - 1))]}" || rc=1
  echo "== unit tests, part $g of $n"
  cat "$logs/unit-$g.log"
done
pids=()
"$py" -m pytest -q -p no:cacheprovider --durations=25 tests/vcluster || rc=1
exit "$rc"
