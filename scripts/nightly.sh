#!/usr/bin/env bash
# The long runs CI bounds, against the release build. Run after scripts/test.sh (which creates .venv).
#   - kill -9 loops: under SQL writes (200 kills) and under streaming writes (1,000 kills of a server
#     fed by append, upsert and row-kind streams);
#   - the replication example under 50 kills of either server or itself;
#   - 32 committer processes with 20 commits each;
#   - the chaos object store with 2,000 steps per seed, the parsers with 20,000 cases each;
#   - the crash and hostile-request suites.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup-python.sh | tail -n 1)
cargo build --release
export TIDELAKE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tidelake"
TIDELAKE_CRASH_LOOPS="${TIDELAKE_CRASH_LOOPS:-200}" \
TIDELAKE_STREAM_CRASH_LOOPS="${TIDELAKE_STREAM_CRASH_LOOPS:-1000}" \
TIDELAKE_REPLICATE_KILLS="${TIDELAKE_REPLICATE_KILLS:-50}" \
TIDELAKE_COMMITS_EACH="${TIDELAKE_COMMITS_EACH:-20}" \
TIDELAKE_TEST_TIMEOUT="${TIDELAKE_TEST_TIMEOUT:-36000}" \
  "$PY" -m pytest -q -s tests/python/test_crash_loop.py tests/python/test_hostile.py \
  tests/python/test_replicate_stream.py tests/python/test_committers.py
TIDELAKE_CHAOS_STEPS="${TIDELAKE_CHAOS_STEPS:-2000}" TIDELAKE_PARSER_CASES="${TIDELAKE_PARSER_CASES:-20000}" \
  cargo test --release --test it -- chaos:: parsers:: crash:: --nocapture
