#!/usr/bin/env bash
# Install the app and start it on the built-in sample at http://127.0.0.1:8050
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e .
exec python3 app.py "$@"
