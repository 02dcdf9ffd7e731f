#!/usr/bin/env bash
# Runs every test: formatting, lints, unit and integration tests (including the interop tests that
# drive pypaimon 2.1.0 from the Python environment this script creates once and reuses).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup-python.sh | tail -n 1)
export TIDELAKE_PYTHON="$PWD/$PY"
# The golden Paimon tables pypaimon 2.1 wrote (tests/fixtures/paimon-2.1/make_fixtures.py makes them).
export TIDELAKE_FIXTURES="${TIDELAKE_FIXTURES:-$PWD/tests/fixtures/paimon-2.1}"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# --workspace covers the client crate with the server's features, so arrow-flight and tonic compile
# once. --all-targets builds examples only as test harnesses, so the runnable example binaries that
# tests/python/test_rust_client.py drives are built explicitly (two small crates, no dependency rebuilt).
cargo test --workspace --all-targets
cargo build --workspace --examples --quiet
# End-to-end: the real ADBC Flight SQL driver and pyarrow.flight against `tidelake serve`
# (the debug binary `cargo test` built above).
TIDELAKE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/tidelake" "$PY" -m pytest -q tests/python
