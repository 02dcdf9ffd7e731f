//! The boundary between tidelake's errors and DataFusion's. Inside a plan (table providers,
//! scans, streams) a tidelake error travels as `DataFusionError::External` ([`df_err`]); when a
//! statement's result leaves DataFusion, [`from_df`] unwraps it again, so the caller (and the
//! Flight status mapping) sees the original error and its kind. DataFusion's own errors become
//! `Query` errors with DataFusion's message.

use datafusion::common::DataFusionError;

use crate::error::{Error, ErrorKind};

/// Wraps a tidelake error so DataFusion carries it through (and the status mapping finds it).
pub(crate) fn df_err(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Converts a DataFusion error, unwrapping tidelake errors it carries.
pub(crate) fn from_df(e: DataFusionError) -> Error {
    match e {
        DataFusionError::External(b) => match b.downcast::<Error>() {
            Ok(ours) => *ours,
            Err(other) => match other.downcast::<DataFusionError>() {
                Ok(inner) => from_df(*inner),
                Err(other) => crate::error::SqlSnafu {
                    message: other.to_string(),
                    kind: ErrorKind::Internal,
                }
                .build(),
            },
        },
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            from_df(*inner)
        }
        e => snafu::IntoError::into_error(
            crate::error::QuerySnafu {
                message: e.strip_backtrace(),
            },
            Box::new(e),
        ),
    }
}
