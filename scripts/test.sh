#!/usr/bin/env bash
# Runs every test: formatting, lints, unit and integration tests (including the interop tests that
# drive pypaimon 2.1.0 from the Python environment this script creates once and reuses).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup-python.sh | tail -n 1)
export TIDELAKE_PYTHON="$PWD/$PY"
export TIDELAKE_FIXTURES="${TIDELAKE_FIXTURES:-$PWD/../shared/fixtures/paimon-2.1}"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# --workspace builds the client crate's examples too (tests/python/test_rust_client.py runs one
# against the server) with the server's features, so arrow-flight and tonic compile once.
cargo test --workspace --all-targets
# End-to-end: the real ADBC Flight SQL driver and pyarrow.flight against `tidelake serve`
# (the debug binary `cargo test` built above).
TIDELAKE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/tidelake" "$PY" -m pytest -q tests/python
