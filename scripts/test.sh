#!/usr/bin/env bash
# Runs every test: formatting, lints, unit and integration tests (including the interop tests that
# drive pypaimon 2.1.0 from the Python environment this script creates once and reuses).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup-python.sh | tail -n 1)
export TIDELAKE_PYTHON="$PWD/$PY"
# The golden Paimon tables pypaimon 2.1 wrote (tests/fixtures/paimon-2.1/make_fixtures.py makes them).
export TIDELAKE_FIXTURES="${TIDELAKE_FIXTURES:-$PWD/tests/fixtures/paimon-2.1}"
# moto's S3 server for the s3:// tests (tests/it/s3.rs, tests/python/test_s3.py), on a free port of
# 127.0.0.1, stopped when this script ends.
S3_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" -m moto.server -H 127.0.0.1 -p "$S3_PORT" >"${TMPDIR:-/tmp}/tidelake-moto-$S3_PORT.log" 2>&1 &
MOTO_PID=$!
trap 'kill "$MOTO_PID" 2>/dev/null || true' EXIT
export TIDELAKE_TEST_S3_ENDPOINT="http://127.0.0.1:$S3_PORT"
"$PY" - "$TIDELAKE_TEST_S3_ENDPOINT" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit("moto's S3 server did not start at " + sys.argv[1])
PY
cargo fmt --all -- --check
# The house's shape: no import cycle between top-level modules, no circle between the files of one,
# no file over 800 lines (scripts/structure.py; it reads src/ only).
python3 scripts/structure.py --check >/dev/null || python3 scripts/structure.py --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# --workspace covers the client crate with the server's features, so arrow-flight and tonic compile
# once. --all-targets builds examples only as test harnesses, so the runnable example binaries that
# tests/python/test_rust_client.py drives are built explicitly (two small crates, no dependency rebuilt).
cargo test --workspace --all-targets
cargo build --workspace --examples --quiet
# End-to-end: the real ADBC Flight SQL driver and pyarrow.flight against `tidelake serve`
# (the debug binary `cargo test` built above).
TIDELAKE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/tidelake" "$PY" -m pytest -q tests/python
