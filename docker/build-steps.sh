#!/usr/bin/env bash
# What docker/Dockerfile does, run without Docker (no engine runs on the build machines): the
# build stage's release build, then the runtime stage's checks: the binary is stripped, runs as an
# unprivileged user (uid 10001) from an empty directory, and serves. Then docker/compose.yaml is
# checked with docker-compose 1.29's schema validation (`config -q`, no engine needed), installed
# into a throwaway virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin tidelake
BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tidelake"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
install -m 0755 "$BIN" "$WORK/tidelake"
if readelf -S "$WORK/tidelake" | grep -q '\.debug_'; then
  echo "the release binary still has debug sections" >&2
  exit 1
fi
echo "release binary: $(du -h "$WORK/tidelake" | cut -f1), no debug sections"
chmod 0755 "$WORK"
mkdir "$WORK/home" && chown 10001:10001 "$WORK/home"
# The runtime user, as in the image: not root, nothing writable but its home.
( cd "$WORK/home" && setpriv --reuid 10001 --regid 10001 --clear-groups \
    env -i HOME="$WORK/home" TIDELAKE_PASSWORD=pw "$WORK/tidelake" serve --warehouse memory:// \
    --listen 127.0.0.1:0 >"$WORK/out" 2>"$WORK/err" & echo $! >"$WORK/pid" )
for _ in $(seq 100); do
  grep -q '^tidelake listening on ' "$WORK/out" 2>/dev/null && break
  sleep 0.1
done
if ! grep -q '^tidelake listening on ' "$WORK/out"; then
  echo "the server did not start as uid 10001:" >&2
  cat "$WORK/err" >&2
  exit 1
fi
kill -TERM "$(cat "$WORK/pid")"
echo "serves as uid 10001: $(head -n 1 "$WORK/out")"
python3 -m venv "$WORK/venv" >/dev/null
# PyYAML 5.4 (docker-compose 1.29's pin) builds only with Cython < 3, without build isolation.
"$WORK/venv/bin/pip" install --quiet 'cython<3' wheel setuptools >/dev/null
"$WORK/venv/bin/pip" install --quiet --no-build-isolation 'PyYAML==5.4.1' >/dev/null
"$WORK/venv/bin/pip" install --quiet 'docker-compose==1.29.2' >/dev/null
( cd docker && "$WORK/venv/bin/docker-compose" -f compose.yaml config -q ) && echo "compose.yaml: valid"
