#!/usr/bin/env bash
# Regenerates the committed code of proto/tidelake.proto, the one source of tidelake's own Flight
# messages, after the .proto changed:
#   clients/rust/src/generated/tidelake.rs    tools/protogen (protox + prost-build; no protoc needed),
#                                             a crate outside the workspace, built into target/protogen
#   clients/python/tidelake/tidelake_pb2.py   grpcio-tools' protoc, from the Python environment of
#                                             scripts/setup-python.sh (or $TIDELAKE_PYTHON)
# tests/python/test_generated_proto.py fails while either is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --manifest-path tools/protogen/Cargo.toml --target-dir "$PWD/target/protogen" -- \
  proto clients/rust/src/generated/tidelake.rs
PY=${TIDELAKE_PYTHON:-$(bash scripts/setup-python.sh | tail -n 1)}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$PY" -m grpc_tools.protoc -Iproto --python_out="$OUT" proto/tidelake.proto
# protoc writes no header of its own choosing: this line is the only change to its output.
{
  echo "# From proto/tidelake.proto by grpcio-tools; regenerate with \`bash scripts/gen-proto.sh\`."
  cat "$OUT/tidelake_pb2.py"
} > clients/python/tidelake/tidelake_pb2.py
echo "regenerated clients/rust/src/generated/tidelake.rs and clients/python/tidelake/tidelake_pb2.py" >&2
