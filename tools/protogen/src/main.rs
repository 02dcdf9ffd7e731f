//! The generator of the Rust client's protobuf messages: compiles `proto/tidelake.proto` with
//! protox (a protobuf compiler in Rust, so no protoc is needed) and turns the descriptors into
//! prost code with prost-build, written to `clients/rust/src/generated/tidelake.rs`, which is
//! committed. Run it through `bash scripts/gen-proto.sh`, which also regenerates the Python module.
//!
//! The file starts with a header naming the SHA-256 of the .proto it was made from and of the code
//! below the header; `tests/python/test_generated_proto.py` recomputes both, so a .proto changed
//! without regenerating, or generated code edited by hand, fails the tests.
//!
//! Usage: `tidelake-protogen [PROTO_DIR [OUTPUT_FILE]]` (defaults: the repository's `proto/` and
//! the client crate's generated file).

// A command-line tool without an async runtime: the server's blocking-IO ban does not apply.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use prost_build::Module;
use sha2::{Digest, Sha256};

/// The one .proto file, relative to the proto directory.
const PROTO_FILE: &str = "tidelake.proto";

fn main() -> ExitCode {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut args = std::env::args_os().skip(1);
    let proto_dir = args
        .next()
        .map_or_else(|| repo.join("proto"), PathBuf::from);
    let output = args.next().map_or_else(
        || repo.join("clients/rust/src/generated/tidelake.rs"),
        PathBuf::from,
    );
    match generate(&proto_dir) {
        Ok(code) => match std::fs::write(&output, code) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("protogen: writing {}: {e}", output.display());
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("protogen: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The generated file's whole text: the header, then prost-build's code for package `tidelake`.
fn generate(proto_dir: &Path) -> Result<String, String> {
    let source = std::fs::read(proto_dir.join(PROTO_FILE))
        .map_err(|e| format!("reading {}: {e}", proto_dir.join(PROTO_FILE).display()))?;
    let fds = protox::compile([PROTO_FILE], [proto_dir]).map_err(|e| e.to_string())?;
    let requests = fds
        .file
        .into_iter()
        .map(|file| (Module::from_protobuf_package_name(file.package()), file))
        .collect();
    let mut modules = prost_build::Config::new()
        .generate(requests)
        .map_err(|e| format!("prost-build: {e}"))?;
    let code = modules
        .remove(&Module::from_protobuf_package_name("tidelake"))
        .ok_or("prost-build generated no module for package tidelake")?;
    if !modules.is_empty() {
        return Err(format!(
            "{PROTO_FILE} should declare only package tidelake, also got {:?}",
            modules.keys().collect::<Vec<_>>()
        ));
    }
    Ok(format!(
        "// Generated from proto/{PROTO_FILE} by tools/protogen (protox + prost-build): do not edit.\n\
         // Regenerate with `bash scripts/gen-proto.sh`.\n\
         // proto-sha256: {}\n\
         // code-sha256: {}\n\
         {code}",
        hex_sha256(&source),
        hex_sha256(code.as_bytes()),
    ))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
