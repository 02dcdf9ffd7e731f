#!/usr/bin/env bash
# The long runs CI bounds: the kill -9 loop under writes with many more kills, and the crash and
# hostile-request suites, against the release build. Run after scripts/test.sh (which creates .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup-python.sh | tail -n 1)
cargo build --release
export TIDELAKE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tidelake"
TIDELAKE_CRASH_LOOPS="${TIDELAKE_CRASH_LOOPS:-200}" "$PY" -m pytest -q -s \
  tests/python/test_crash_loop.py tests/python/test_hostile.py
