#!/usr/bin/env bash
# corral bootstrap on a fresh Debian 12+/Ubuntu 24.04+ machine, as root.
#   bash scripts/bootstrap.sh up     -> install, then `corral up` (virtual cluster -> deployed -> validated)
#   bash scripts/bootstrap.sh test   -> install, then the test suite (unit + virtual-cluster end to end)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
case "$what" in up|test) ;; *) echo "usage: bash scripts/bootstrap.sh up|test" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "bootstrap: run as root (the virtual cluster mounts, bridges and boots nodes)" >&2; exit 2; }

pkgs="python3 python3-venv systemd-container debootstrap dpkg-dev openssh-client openssh-server iproute2 openssl gpg gpgv skopeo"
# the tests drive the notebook hub in a real browser: Debian's chromium, through Playwright (from PyPI); sudo's
# visudo checks the hub's rendered sudo rule
[ "$what" = test ] && pkgs="$pkgs chromium sudo"
missing=""
for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "bootstrap: installing host packages:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
if [ ! -x .venv/bin/corral ] || [ pyproject.toml -nt .venv/.installed ] || [ scripts/constraints.txt -nt .venv/.installed ]; then
  echo "bootstrap: creating .venv and installing corral" >&2
  python3 -m venv .venv
  # the compiled dependencies at the versions corral pins wheels of for nodes of another Python (fanout)
  .venv/bin/pip install -q --disable-pip-version-check -c scripts/constraints.txt -e '.[test]'
  touch .venv/.installed
fi
if [ ! -x .venv/bin/promtool ] || [ ! -x .venv/bin/amtool ]; then
  # promtool/amtool check the rendered rule and Alertmanager files (unit tests); taken from the
  # Debian packages without installing them (installing would start servers on this machine)
  echo "bootstrap: extracting promtool and amtool from the Debian packages into .venv/bin" >&2
  tmp=$(mktemp -d); chmod 755 "$tmp"
  ( cd "$tmp" && { apt-get download -q prometheus prometheus-alertmanager >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get download -q prometheus prometheus-alertmanager >/dev/null; }; } )
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/x"; done
  install -m 755 "$tmp/x/usr/bin/promtool" "$tmp/x/usr/bin/amtool" .venv/bin/
  rm -rf "$tmp"
fi
case "$what" in
  up)   exec .venv/bin/corral up ;;
  test) exec bash scripts/run-tests.sh ;;  # the unit tests one process per core, then the virtual cluster's
esac
