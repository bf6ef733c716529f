#!/usr/bin/env bash
# Regenerate the notebook hub's pinned wheel lists (src/corral/render/files/jupyter-pyXY.txt): the
# top-level pins below, resolved by pip for each Python of corral's node releases, written as
# name==version with the sha256 of the one wheel pip chose. Run by a developer after changing a pin;
# review the diff (every new or changed wheel) before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
PINS="jupyterhub==5.5.4 batchspawner==1.3.0 jupyterlab==4.5.11 jupyterhub-idle-culler==2.0.0"
for py in 3.11 3.13; do
  tag=${py/./}
  tmp=$(mktemp -d)
  .venv/bin/pip download -q --disable-pip-version-check -d "$tmp" --only-binary=:all: --python-version "$py" \
    --implementation cp --abi "cp$tag" --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any $PINS
  out=src/corral/render/files/jupyter-py$tag.txt
  {
    echo "# The notebook hub's wheels for CPython $py (scripts/jupyter-lock.sh; pins: $PINS)."
    echo "# Installed with pip --no-index --require-hashes: a wheel whose sha256 differs is refused."
    for whl in "$tmp"/*.whl; do
      f=$(basename "$whl"); name=${f%%-*}; rest=${f#*-}; version=${rest%%-*}
      echo "$name==$version --hash=sha256:$(sha256sum "$whl" | cut -d' ' -f1)"
    done | sort -f
  } > "$out"
  rm -rf "$tmp"
  echo "$out: $(grep -c '^[^#]' "$out") wheels"
done
