//! The one mapping from tidelake errors to gRPC statuses.

use tonic::{Code, Status};

use crate::error::{Error, ErrorKind};

/// The gRPC code of an error kind.
pub fn code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::Conflict => Code::Aborted,
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::Unsupported => Code::Unimplemented,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
        ErrorKind::ResourceExhausted => Code::ResourceExhausted,
        ErrorKind::OutOfRange => Code::OutOfRange,
        ErrorKind::Cancelled => Code::Cancelled,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Internal => Code::Internal,
    }
}

/// The status a client sees for `e`; internal errors are logged with their location.
pub fn to_status(e: Error) -> Status {
    let kind = e.kind();
    if kind == ErrorKind::Internal {
        tracing::error!(error = ?e, "internal error");
    }
    Status::new(code(kind), e.to_string())
}

/// Shorthand for an InvalidArgument status.
pub fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message.into())
}
