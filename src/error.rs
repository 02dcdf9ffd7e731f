//! The crate's error type: every variant names the object involved (table, file, snapshot) and
//! carries the source location where it was raised, so one log line reads like a stack trace.
//!
//! Errors are classified once, by [`Error::kind`]: commit retries ([`Error::is_retryable`]), the
//! gRPC status mapping (`server/status.rs`) and the REST catalog's HTTP statuses act on the kind
//! only. A user's mistake is InvalidArgument (or NotFound, AlreadyExists, ...); a broken invariant
//! of tidelake's own, an Arrow error on its own batches included, is Internal.
//!
//! A check that cannot name what it checks returns a type with one class instead of a string:
//! [`Malformed`] (a decoder's finding; the caller names the file and it is Corrupt) or
//! [`Refusal`] (a request's mistake; the caller names whose and it is InvalidArgument). The
//! class is decided where the fault is found, never by the caller.

use snafu::{Location, Snafu};

/// What kind of failure an [`Error`] is; callers decide on retries and status codes from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    Conflict,
    /// Another writer uses this writer's commit user: it must stop (never retried).
    Fenced,
    InvalidArgument,
    Unsupported,
    Unauthenticated,
    PermissionDenied,
    ResourceExhausted,
    /// A position outside what is retained (an expired snapshot).
    OutOfRange,
    /// The request was valid once but the state it depends on changed (a subscription's filter
    /// after a schema change).
    FailedPrecondition,
    /// The caller cancelled a long operation.
    Cancelled,
    Unavailable,
    Internal,
}

#[derive(Debug, Snafu)]
#[snafu(visibility(pub(crate)))]
pub enum Error {
    #[snafu(display("storage error at {path}: {source}"))]
    Storage {
        path: String,
        source: object_store::Error,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("I/O error at {path}: {source}"))]
    LocalIo {
        path: String,
        source: std::io::Error,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{path}: invalid JSON: {source}"))]
    Json {
        path: String,
        source: serde_json::Error,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{path}: Parquet error: {source}"))]
    Parquet {
        path: String,
        source: parquet::errors::ParquetError,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{context}: {source}"))]
    Arrow {
        context: String,
        source: arrow::error::ArrowError,
        #[snafu(implicit)]
        location: Location,
    },
    /// A file exists but its content is not what the format allows (truncated, wrong version, ...).
    #[snafu(display("corrupt file {path}: {message}"))]
    Corrupt {
        path: String,
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{message}"))]
    NotFound {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{message}"))]
    AlreadyExists {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{message}"))]
    InvalidArgument {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    #[snafu(display("{message}"))]
    Unsupported {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    /// Another committer won the race or changed what this commit depends on.
    #[snafu(display("commit conflict on {table}: {message}"))]
    Conflict {
        table: String,
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    /// A snapshot of this writer's commit user that this writer did not commit: another stream
    /// uses the same commit user, and this one stops before publishing anything more.
    #[snafu(display(
        "commit user '{commit_user}' committed snapshot {snapshot} of {table} from another stream; this stream is fenced"
    ))]
    Fenced {
        table: String,
        commit_user: String,
        snapshot: i64,
        #[snafu(implicit)]
        location: Location,
    },
    /// A failure reported by the query engine (DataFusion); [`Error::kind`] classifies it.
    #[snafu(display("{message}"))]
    Query {
        message: String,
        source: Box<datafusion::error::DataFusionError>,
        #[snafu(implicit)]
        location: Location,
    },
    /// A failure of a statement whose kind is known where it is raised (a timeout, say).
    #[snafu(display("{message}"))]
    Sql {
        message: String,
        kind: ErrorKind,
        #[snafu(implicit)]
        location: Location,
    },
    /// A read position that is no longer (or not yet) retained.
    #[snafu(display("{message}"))]
    OutOfRange {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    /// A long operation stopped because its caller cancelled it.
    #[snafu(display("{message}"))]
    Cancelled {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
    /// A broken invariant inside tidelake: a bug, not a user mistake.
    #[snafu(display("internal error: {message}"))]
    Internal {
        message: String,
        #[snafu(implicit)]
        location: Location,
    },
}

impl Error {
    /// The class of this error; the single place that decides it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Storage { source, .. } => match source {
                object_store::Error::NotFound { .. } => ErrorKind::NotFound,
                object_store::Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
                object_store::Error::Precondition { .. } => ErrorKind::Conflict,
                object_store::Error::NotImplemented { .. } => ErrorKind::Unsupported,
                _ => ErrorKind::Unavailable,
            },
            Error::LocalIo { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                std::io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
                _ => ErrorKind::Unavailable,
            },
            Error::Json { .. } | Error::Parquet { .. } | Error::Corrupt { .. } => {
                ErrorKind::Internal
            }
            Error::Arrow { source, .. } => own_arrow_kind(source),
            Error::Query { source, .. } => query_kind(source),
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::Fenced { .. } => ErrorKind::Fenced,
            Error::Internal { .. } => ErrorKind::Internal,
            Error::OutOfRange { .. } => ErrorKind::OutOfRange,
            Error::Cancelled { .. } => ErrorKind::Cancelled,
            Error::Sql { kind, .. } => *kind,
        }
    }

    /// Whether repeating the same operation may succeed (storage hiccups and lost commit races).
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind(), ErrorKind::Conflict | ErrorKind::Unavailable)
    }
}

/// The kind of a query engine's error, looking through the wrappers DataFusion adds (context,
/// diagnostics, errors shared between partitions, external errors) to a tidelake error inside.
fn query_kind(e: &datafusion::error::DataFusionError) -> ErrorKind {
    use datafusion::error::DataFusionError as E;
    match e {
        E::External(b) => {
            if let Some(ours) = b.downcast_ref::<Error>() {
                ours.kind()
            } else if let Some(inner) = b.downcast_ref::<E>() {
                query_kind(inner)
            } else if let Some(arrow) = b.downcast_ref::<arrow::error::ArrowError>() {
                arrow_kind(arrow)
            } else {
                ErrorKind::Internal
            }
        }
        E::Context(_, inner) | E::Diagnostic(_, inner) => query_kind(inner),
        E::Shared(inner) => query_kind(inner),
        E::ArrowError(a, _) => arrow_kind(a),
        E::ResourcesExhausted(_) => ErrorKind::ResourceExhausted,
        E::NotImplemented(_) => ErrorKind::Unsupported,
        E::Plan(_) | E::SQL(_, _) | E::SchemaError(_, _) | E::Execution(_) => {
            ErrorKind::InvalidArgument
        }
        _ => ErrorKind::Internal,
    }
}

/// The kind of an Arrow error a statement's own computation raised (inside DataFusion): the
/// user's data or expression is wrong (a cast, a parse, a division by zero, an overflow, an
/// invalid argument), unless it carries an error of ours or the engine's, or is one of Arrow's
/// limits.
fn arrow_kind(e: &arrow::error::ArrowError) -> ErrorKind {
    use arrow::error::ArrowError as A;
    match e {
        A::ExternalError(b) => external_kind(b.as_ref()),
        A::NotYetImplemented(_) => ErrorKind::Unsupported,
        A::MemoryError(_)
        | A::OffsetOverflowError(_)
        | A::DictionaryKeyOverflowError
        | A::RunEndIndexOverflowError => ErrorKind::ResourceExhausted,
        A::CastError(_)
        | A::ParseError(_)
        | A::InvalidArgumentError(_)
        | A::ComputeError(_)
        | A::DivideByZero
        | A::ArithmeticOverflow(_)
        | A::CsvError(_)
        | A::JsonError(_)
        | A::IpcError(_) => ErrorKind::InvalidArgument,
        _ => ErrorKind::Internal,
    }
}

/// The kind of an Arrow error raised by tidelake's own work on its own batches (merging,
/// reading, routing, concatenating): a broken invariant, so Internal, unless it carries an error
/// of ours or the engine's, or is one of Arrow's limits. Where user input reaches an Arrow call
/// (a batch that does not match the table), the caller raises InvalidArgument itself.
fn own_arrow_kind(e: &arrow::error::ArrowError) -> ErrorKind {
    use arrow::error::ArrowError as A;
    match e {
        A::ExternalError(b) => external_kind(b.as_ref()),
        A::NotYetImplemented(_) => ErrorKind::Unsupported,
        A::MemoryError(_) | A::OffsetOverflowError(_) => ErrorKind::ResourceExhausted,
        _ => ErrorKind::Internal,
    }
}

/// The kind of an error Arrow carries for someone else: ours, or the engine's.
fn external_kind(b: &(dyn std::error::Error + Send + Sync + 'static)) -> ErrorKind {
    match b.downcast_ref::<Error>() {
        Some(ours) => ours.kind(),
        None => match b.downcast_ref::<datafusion::error::DataFusionError>() {
            Some(d) => query_kind(d),
            None => ErrorKind::Internal,
        },
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of `kind` raised by a door (a server handler) that knows the kind where it raises
/// it; the location is the caller's.
#[track_caller]
pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> Error {
    SqlSnafu {
        message: message.into(),
        kind,
    }
    .build()
}

/// Bytes that do not follow their format, as a decoder that does not know which file it reads
/// finds them. It has one class: the caller names the file ([`Malformed::at`]) and it becomes
/// [`Error::Corrupt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl Malformed {
    /// The [`Error::Corrupt`] of the file at `path`; the location is the caller's.
    #[track_caller]
    pub fn at(self, path: impl Into<String>) -> Error {
        CorruptSnafu {
            path: path.into(),
            message: self.0,
        }
        .build()
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Malformed {
    /// The same fault, said of `what` (a part of the file: an entry, a partition).
    pub fn within(self, what: impl std::fmt::Display) -> Self {
        Malformed(format!("{what}: {}", self.0))
    }
}

/// The request's mistake, as a check that does not know whose request it is finds it. It has one
/// class: the caller names the request ([`Refusal::of`]) and it becomes
/// [`Error::InvalidArgument`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl Refusal {
    /// The [`Error::InvalidArgument`] of `whose` request (a table, a column); the location is
    /// the caller's.
    #[track_caller]
    pub fn of(self, whose: impl std::fmt::Display) -> Error {
        invalid_argument(format!("{whose}: {}", self.0))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `Err(Malformed)` with a formatted message.
macro_rules! malformed {
    ($($arg:tt)*) => {
        Err($crate::error::Malformed(format!($($arg)*)))
    };
}
pub(crate) use malformed;

/// An [`Error::InvalidArgument`] (the request's mistake) saying `message`; the location is the
/// caller's.
#[track_caller]
pub(crate) fn invalid_argument(message: impl Into<String>) -> Error {
    InvalidArgumentSnafu {
        message: message.into(),
    }
    .build()
}

/// An [`Error::Internal`] (a broken invariant of tidelake's own) saying `message`; the location
/// is the caller's.
#[track_caller]
pub(crate) fn internal(message: impl Into<String>) -> Error {
    InternalSnafu {
        message: message.into(),
    }
    .build()
}

/// Shorthand for an [`Error::InvalidArgument`] with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::error::InvalidArgumentSnafu { message: format!($($arg)*) }.fail()
    };
}
pub(crate) use invalid;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int32Array, StringArray};
    use arrow::error::ArrowError;
    use datafusion::error::DataFusionError;
    use snafu::{IntoError, ResultExt};

    #[test]
    fn arrow_errors_on_our_own_batches_are_bugs_and_on_user_computations_bad_input() {
        // tidelake's own concatenation of batches that should agree: a broken invariant.
        let a: ArrayRef = std::sync::Arc::new(Int32Array::from(vec![1]));
        let b: ArrayRef = std::sync::Arc::new(StringArray::from(vec!["x"]));
        let ours = arrow::compute::concat(&[a.as_ref(), b.as_ref()])
            .context(ArrowSnafu {
                context: "concatenating runs",
            })
            .unwrap_err();
        assert_eq!(ours.kind(), ErrorKind::Internal);
        // The same refusal inside a user's query (DataFusion evaluating their expression).
        let cast = DataFusionError::ArrowError(
            Box::new(ArrowError::CastError("cannot cast 'x' to Int32".into())),
            None,
        );
        let query = QuerySnafu { message: "query" }.into_error(Box::new(cast));
        assert_eq!(query.kind(), ErrorKind::InvalidArgument);
        // Arrow carrying one of ours keeps our kind, whichever side raised it.
        let inner = ArrowError::ExternalError(Box::new(of_kind(ErrorKind::NotFound, "gone")));
        let wrapped = Err::<(), _>(inner)
            .context(ArrowSnafu { context: "reading" })
            .unwrap_err();
        assert_eq!(wrapped.kind(), ErrorKind::NotFound);
        let limit = Err::<(), _>(ArrowError::MemoryError("too big".into()))
            .context(ArrowSnafu { context: "reading" })
            .unwrap_err();
        assert_eq!(limit.kind(), ErrorKind::ResourceExhausted);
    }
}
