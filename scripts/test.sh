#!/usr/bin/env bash
# Install everything the test suite needs (Python extras, Debian's chromium + chromedriver for
# the browser tests) and run the whole suite. Safe to re-run: installed pieces are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi
python3 -m pip install -q -e ".[test]"
python3 -m pytest "$@"
