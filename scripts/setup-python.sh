#!/usr/bin/env bash
# Creates (once) and reuses the Python virtual environment the interop tests and the bench need.
# Prints the interpreter's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TIDELAKE_VENV:-.venv}
STAMP="$VENV/.tidelake-deps-v3"
if [ ! -f "$STAMP" ]; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --upgrade pip >&2
  # pypaimon 2.1.0 pins an old pyarrow (<20) and polars; it works with current ones
  # (../shared/bench/README.md), so it is installed without its pins and its runtime deps are listed here.
  "$VENV/bin/pip" install --quiet pyarrow numpy 'pandas<3' fastavro zstandard 'fsspec<2026' packaging \
    cachetools isal polars pyroaring readerwriterlock requests urllib3 'backports.zstd<1.4' cramjam pyyaml >&2
  # The peers `tidelake bench` measures against besides pypaimon (../shared/bench/peers_w.py).
  "$VENV/bin/pip" install --quiet deltalake >&2
  # The Flight SQL end-to-end tests (tests/python) drive the server with real clients.
  "$VENV/bin/pip" install --quiet adbc-driver-flightsql adbc-driver-manager pytest >&2
  "$VENV/bin/pip" install --quiet --no-deps pypaimon==2.1.0 >&2
  "$VENV/bin/python" -c "import pypaimon, pyarrow, adbc_driver_flightsql.dbapi, pytest" >&2
  touch "$STAMP"
fi
echo "$VENV/bin/python"
