//! The one mapping from tidelake errors to gRPC statuses.

use tonic::{Code, Status};

use crate::error::{Error, ErrorKind};

/// The gRPC code of an error kind.
pub fn code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::Conflict | ErrorKind::Fenced => Code::Aborted,
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::Unsupported => Code::Unimplemented,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
        ErrorKind::ResourceExhausted => Code::ResourceExhausted,
        ErrorKind::OutOfRange => Code::OutOfRange,
        ErrorKind::FailedPrecondition => Code::FailedPrecondition,
        ErrorKind::Cancelled => Code::Cancelled,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Internal => Code::Internal,
    }
}

/// The error kind of a gRPC code (for a status made elsewhere, e.g. by a tenant's limits, that
/// another protocol answers): the inverse of [`code`], up to kinds that share a code.
pub fn kind_of(code: Code) -> ErrorKind {
    match code {
        Code::NotFound => ErrorKind::NotFound,
        Code::AlreadyExists => ErrorKind::AlreadyExists,
        Code::Aborted => ErrorKind::Conflict,
        Code::InvalidArgument => ErrorKind::InvalidArgument,
        Code::Unimplemented => ErrorKind::Unsupported,
        Code::Unauthenticated => ErrorKind::Unauthenticated,
        Code::PermissionDenied => ErrorKind::PermissionDenied,
        Code::ResourceExhausted => ErrorKind::ResourceExhausted,
        Code::OutOfRange => ErrorKind::OutOfRange,
        Code::FailedPrecondition => ErrorKind::FailedPrecondition,
        Code::Cancelled => ErrorKind::Cancelled,
        Code::Unavailable => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

/// Longest status message sent, in bytes. gRPC carries the message in a header (percent-encoded,
/// so up to three times longer), and clients drop a response whose headers exceed their limit
/// (8 to 16 KiB): the user would never see the error.
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// The status a client sees for `e`; internal errors are logged with their location.
pub fn to_status(e: Error) -> Status {
    let kind = e.kind();
    if kind == ErrorKind::Internal {
        tracing::error!(error = ?e, "internal error");
    }
    Status::new(code(kind), bounded_message(&e.to_string()))
}

/// `status` with its message made one line of at most [`MAX_MESSAGE_BYTES`] (every status the
/// service sends passes here, whoever built it).
pub fn bounded(status: Status) -> Status {
    let message = status.message();
    if message.len() <= MAX_MESSAGE_BYTES && !message.contains(['\n', '\r']) {
        return status;
    }
    let mut out = Status::new(status.code(), bounded_message(message));
    *out.metadata_mut() = status.metadata().clone();
    out
}

/// One line of at most [`MAX_MESSAGE_BYTES`]: a longer text keeps its start and its end (where
/// messages say what went wrong and where), and says how much of the middle it cut.
pub fn bounded_message(message: &str) -> String {
    let one_line: String = if message.contains(['\n', '\r']) {
        message
            .split(['\n', '\r'])
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        message.to_string()
    };
    if one_line.len() <= MAX_MESSAGE_BYTES {
        return one_line;
    }
    let head = floor_char_boundary(&one_line, MAX_MESSAGE_BYTES * 3 / 4);
    let tail = ceil_char_boundary(&one_line, one_line.len() - MAX_MESSAGE_BYTES / 8);
    format!(
        "{}… ({} bytes cut) …{}",
        &one_line[..head],
        tail - head,
        &one_line[tail..]
    )
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `status` with `context` after its message (same code and metadata), as one bounded line: what a
/// handler adds to an error it passes on, such as the stream it ended.
pub fn with_context(status: &Status, context: &str) -> Status {
    let mut out = Status::new(
        status.code(),
        bounded_message(&format!("{}; {context}", status.message())),
    );
    *out.metadata_mut() = status.metadata().clone();
    out
}

/// The status of a failure of `kind` that a handler detects itself (through [`to_status`], so
/// the code comes from [`code`] and an internal error is logged with the caller's location).
#[track_caller]
pub fn status(kind: ErrorKind, message: impl Into<String>) -> Status {
    to_status(crate::error::of_kind(kind, message))
}

/// Shorthand for an InvalidArgument status.
#[track_caller]
pub fn invalid(message: impl Into<String>) -> Status {
    status(ErrorKind::InvalidArgument, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_appended_keeping_the_code_and_metadata() {
        let mut s = Status::new(Code::Aborted, "conflict\nin bucket 3");
        s.metadata_mut().insert("x-retry", "1".parse().unwrap());
        let out = with_context(&s, "streaming write into db.t");
        assert_eq!(out.code(), Code::Aborted);
        assert_eq!(
            out.message(),
            "conflict in bucket 3; streaming write into db.t"
        );
        assert_eq!(out.metadata().get("x-retry").unwrap(), "1");
    }

    #[test]
    fn every_kind_comes_back_from_its_code() {
        use ErrorKind::*;
        for k in [
            NotFound,
            AlreadyExists,
            Conflict,
            Fenced,
            InvalidArgument,
            Unsupported,
            Unauthenticated,
            PermissionDenied,
            ResourceExhausted,
            OutOfRange,
            FailedPrecondition,
            Cancelled,
            Unavailable,
            Internal,
        ] {
            assert_eq!(code(kind_of(code(k))), code(k), "{k:?}");
        }
    }

    #[test]
    fn long_messages_are_cut_to_one_bounded_line() {
        let sql = format!("SELECT {} FROM nowhere", "é".repeat(100_000));
        let m = bounded_message(&format!("table 'nowhere' not found in: {sql}\nsecond line"));
        assert!(m.len() <= MAX_MESSAGE_BYTES + 64, "{}", m.len());
        assert!(m.starts_with("table 'nowhere' not found in: SELECT"));
        assert!(m.ends_with("FROM nowhere second line"), "{m}");
        assert!(m.contains("bytes cut"));
        assert!(!m.contains('\n'));
        let s = bounded(Status::invalid_argument("x".repeat(10_000)));
        assert_eq!(s.code(), Code::InvalidArgument);
        assert!(s.message().len() < MAX_MESSAGE_BYTES + 64);
        assert_eq!(bounded_message("short"), "short");
    }
}
