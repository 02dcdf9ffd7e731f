#!/usr/bin/env bash
# Creates (once) and reuses the Python virtual environment the interop tests and the bench need.
# Prints the interpreter's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TIDELAKE_VENV:-.venv}
STAMP="$VENV/.tidelake-deps-v6"
# v7 (its own step at the end) = v6 + moto's S3 server.
# v6 = v5 + PyJWT and cryptography (below); v5 = v4 + protobuf and grpcio-tools; v4 = v3's
# dependencies + the client package (clients/python). An older environment only gets what it lacks.
if [ ! -f "$STAMP" ] && { [ -f "$VENV/.tidelake-deps-v5" ] || [ -f "$VENV/.tidelake-deps-v4" ] || [ -f "$VENV/.tidelake-deps-v3" ]; } &&
  "$VENV/bin/python" -c "import pypaimon, pyarrow, adbc_driver_flightsql.dbapi, pytest, deltalake, polars" 2>/dev/null; then
  DEPS_PRESENT=1
else
  DEPS_PRESENT=0
fi
if [ ! -f "$STAMP" ] && [ "$DEPS_PRESENT" = 0 ]; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --upgrade pip >&2
  # To install clients/python in editable mode without build isolation (PEP 660 needs setuptools >= 64).
  "$VENV/bin/pip" install --quiet 'setuptools>=64' wheel >&2
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
fi
if [ ! -f "$STAMP" ]; then
  # protobuf: the client's runtime for its generated messages (clients/python/tidelake/tidelake_pb2.py,
  # made by grpcio-tools 1.76.0, whose code needs a protobuf 6 runtime of at least 6.31.1; the same
  # range as clients/python/pyproject.toml). grpcio-tools: scripts/gen-proto.sh and the stale check
  # tests/python/test_generated_proto.py, pinned so that regenerating gives the same bytes.
  "$VENV/bin/pip" install --quiet 'protobuf>=6.31.1,<7' 'grpcio-tools==1.76.0' >&2
  # The auth tests (tests/python/test_auth.py) mint identity-provider tokens (RS256, ES256, EdDSA,
  # HS256) with PyJWT, whose asymmetric algorithms need cryptography; cryptography also makes the
  # TLS certificates of the TLS tests.
  "$VENV/bin/pip" install --quiet 'pyjwt==2.15.1' 'cryptography==50.0.2' >&2
  # The Python client (`import tidelake`: changelog subscriptions), editable, offline: its
  # dependencies (pyarrow, ADBC, protobuf) are installed above. Without setuptools >= 64 and wheel
  # (a venv made offline), a .pth file puts the source directory on the path, which is what an
  # editable install amounts to.
  if "$VENV/bin/python" -c "import sys, setuptools, wheel; sys.exit(int(setuptools.__version__.split('.')[0]) < 64)" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet --no-deps --no-build-isolation --no-index -e clients/python >&2
  else
    SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$PWD/clients/python" > "$SITE/tidelake-client.pth"
  fi
  "$VENV/bin/python" -c "import tidelake" >&2
  touch "$STAMP"
fi
if [ ! -f "$VENV/.tidelake-deps-v7" ]; then
  # moto's S3 server (`python -m moto.server`): the object store of the s3:// tests
  # (tests/python/test_s3.py and tests/it/s3.rs start it on 127.0.0.1). pyarrow's own S3 filesystem
  # is what pypaimon's fs.s3.* options drive, so nothing else is needed for the interop tests.
  "$VENV/bin/pip" install --quiet 'moto[server]==5.2.5' >&2
  "$VENV/bin/python" -c "import moto.server, flask" >&2
  touch "$VENV/.tidelake-deps-v7"
fi
if [ ! -f "$VENV/.tidelake-deps-v8" ]; then
  # DuckDB, in-process: the peer of the analytics benchmark (bench/analytics.py reads the same
  # Parquet files tidelake wrote). Benchmarks only; no test imports it.
  "$VENV/bin/pip" install --quiet 'duckdb==2.0.1' >&2
  "$VENV/bin/python" -c "import duckdb" >&2
  touch "$VENV/.tidelake-deps-v8"
fi
echo "$VENV/bin/python"
