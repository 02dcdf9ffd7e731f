#!/usr/bin/env bash
# Creates (once) and reuses the Python virtual environment the interop tests and the benchmarks
# need, from the pinned requirements-test.txt. Prints the interpreter's path on its last line.
#
# The environment is remade (packages added, changed ones reinstalled) whenever
# requirements-test.txt or this script changes: the hash of both is kept in the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TIDELAKE_VENV:-.venv}
REQ=requirements-test.txt
WANT=$(cat "$REQ" scripts/setup-python.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.tidelake-env" 2>/dev/null || true)" != "$WANT" ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  # pypaimon 2.1.0 pins an old pyarrow (<20) and polars; it works with current ones
  # (../shared/bench/README.md), so it goes in without its pins (its runtime dependencies are in
  # the requirements file).
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps pypaimon==2.1.0 >&2
  # The Python client (`import tidelake`: changelog subscriptions), editable and offline: its
  # dependencies (pyarrow, ADBC, protobuf) are in the requirements file.
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    --no-index -e clients/python >&2
  # What the tests import, checked once: pypaimon and the Flight clients, moto's S3 server (the
  # s3:// tests start it), PyJWT and cryptography (tokens, TLS certificates), DuckDB (the
  # analytics benchmark's peer), deltalake (workload W's peer), grpcio-tools (scripts/gen-proto.sh).
  "$VENV/bin/python" -c "import pypaimon, pyarrow, adbc_driver_flightsql.dbapi, pytest, moto.server, \
flask, jwt, cryptography, duckdb, deltalake, polars, grpc_tools, tidelake" >&2
  echo "$WANT" >"$VENV/.tidelake-env"
fi
echo "$VENV/bin/python"
