#!/usr/bin/env bash
# Regenerate a venv's pinned lists (src/corral/render/files/<venv>-pyXY.txt, read by workbench_wheels.py):
# the top-level pins below, resolved by pip for each Python of corral's node releases, written as
# name==version with the sha256 of the one file pip chose. Run by a developer after changing a pin;
# review the diff (every new or changed file) before committing it.
#   scripts/venv-lock.sh jupyter     the notebook hub's wheels (wheels only)
#   scripts/venv-lock.sh easybuild   EasyBuild: its sdists (PyPI has no wheels of it) and the setuptools and
#                                    wheel wheels that build them on the node, no dependencies (it needs none)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: $0 jupyter|easybuild}
case "$venv" in
  jupyter) PINS="jupyterhub==5.5.4 batchspawner==1.3.0 jupyterlab==4.5.11 jupyterhub-idle-culler==2.0.0"
           what="The notebook hub's wheels"; only="--only-binary=:all:" ;;
  easybuild) PINS="easybuild-framework==5.4.1 easybuild-easyblocks==5.4.1 setuptools==80.9.0 wheel==0.45.1"
             what="EasyBuild's sdists and the wheels that build them"; only="--no-deps" ;;
  *) echo "unknown venv $venv" >&2; exit 2 ;;
esac
for py in 3.11 3.13; do
  tag=${py/./}
  tmp=$(mktemp -d)
  .venv/bin/pip download -q --disable-pip-version-check -d "$tmp" $only --python-version "$py" \
    --implementation cp --abi "cp$tag" --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any $PINS
  out=src/corral/render/files/$venv-py$tag.txt
  {
    echo "# $what for CPython $py (scripts/venv-lock.sh $venv; pins: $PINS)."
    echo "# Installed with pip --no-index --require-hashes: a file whose sha256 differs is refused."
    for f in "$tmp"/*.whl "$tmp"/*.tar.gz; do
      [ -e "$f" ] || continue
      b=$(basename "$f"); b=${b%.tar.gz}; name=${b%%-*}; rest=${b#*-}; version=${rest%%-*}
      echo "$name==$version --hash=sha256:$(sha256sum "$f" | cut -d' ' -f1)"
    done | sort -f
  } > "$out"
  rm -rf "$tmp"
  echo "$out: $(grep -c '^[^#]' "$out") files"
done
