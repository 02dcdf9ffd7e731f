//! Flight's session actions (`SetSessionOptions`, `GetSessionOptions`, `CloseSession`,
//! `CancelFlightInfo`): their messages, which arrow-flight 59 does not generate (field numbers
//! follow Flight.proto), and their answers ([`act`]). A session is a token's: its current
//! database is kept by the authenticator ([`Authenticator::session`]), on this server only.

use std::collections::HashMap;

use arrow_flight::{CancelFlightInfoResult, CancelStatus};
use prost::Message;
use tonic::Status;

use super::auth::Authenticator;
use super::principal::Principal;
use super::status::{status, to_status};
use crate::error::ErrorKind;

/// Flight-core session actions answered by the service (name, description).
pub const SESSION_ACTIONS: &[(&str, &str)] = &[
    (
        "SetSessionOptions",
        "Sets session options: 'schema' (current database) and 'catalog' (must be 'tidelake')",
    ),
    ("GetSessionOptions", "Returns the session's catalog and schema"),
    ("CloseSession", "Ends the session; its token stops working"),
    (
        "CancelFlightInfo",
        "Cancels a FlightInfo (tickets hold no server state; streams stop when the client stops reading)",
    ),
];

/// `SessionOptionValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionOptionValue {
    #[prost(oneof = "OptionValue", tags = "1, 2, 3, 4, 5")]
    pub option_value: Option<OptionValue>,
}

/// `SessionOptionValue.StringListValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringListValue {
    #[prost(string, repeated, tag = "1")]
    pub values: Vec<String>,
}

/// The `option_value` oneof.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum OptionValue {
    #[prost(string, tag = "1")]
    StringValue(String),
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    #[prost(sfixed64, tag = "3")]
    Int64Value(i64),
    #[prost(double, tag = "4")]
    DoubleValue(f64),
    #[prost(message, tag = "5")]
    StringListValue(StringListValue),
}

/// `SetSessionOptionsRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsRequest {
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `SetSessionOptionsResult.Error`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionError {
    /// 1 = invalid name, 2 = invalid value, 3 = error.
    #[prost(int32, tag = "1")]
    pub value: i32,
}

/// `SetSessionOptionsResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsResult {
    #[prost(map = "string, message", tag = "1")]
    pub errors: HashMap<String, SetSessionOptionError>,
}

/// `GetSessionOptionsResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetSessionOptionsResult {
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `CloseSessionResult` (status 1 = closed).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseSessionResult {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// Error code for an unknown option name.
pub const INVALID_NAME: i32 = 1;
/// Error code for a value of the wrong type or an unknown database.
pub const INVALID_VALUE: i32 = 2;

/// A string option value.
pub fn string_value(s: impl Into<String>) -> SessionOptionValue {
    SessionOptionValue {
        option_value: Some(OptionValue::StringValue(s.into())),
    }
}

/// Answers session action `name` (one of [`SESSION_ACTIONS`]) with `body` for `principal`.
pub async fn act(
    auth: &Authenticator,
    principal: &Principal,
    name: &str,
    body: &[u8],
) -> Result<arrow_flight::Result, Status> {
    let body: Vec<u8> = match name {
        "SetSessionOptions" => {
            let req = SetSessionOptionsRequest::decode(body).map_err(|_| {
                status(
                    ErrorKind::InvalidArgument,
                    "malformed SetSessionOptionsRequest",
                )
            })?;
            let mut result = SetSessionOptionsResult::default();
            for (name, value) in req.session_options {
                let text = match value.option_value {
                    Some(OptionValue::StringValue(s)) => Some(s),
                    _ => None,
                };
                let engine = &principal.tenant.engine;
                let error = match (name.as_str(), text) {
                    ("catalog", Some(c)) if c == engine.catalog_name() || c.is_empty() => None,
                    ("schema", Some(db)) => match engine.catalog().database_exists(&db).await {
                        Ok(true) => {
                            auth.set_database(principal, db);
                            None
                        }
                        Ok(false) => Some(INVALID_VALUE),
                        Err(e) => return Err(to_status(e)),
                    },
                    ("catalog" | "schema", _) => Some(INVALID_VALUE),
                    _ => Some(INVALID_NAME),
                };
                if let Some(value) = error {
                    result.errors.insert(name, SetSessionOptionError { value });
                }
            }
            result.encode_to_vec()
        }
        "GetSessionOptions" => {
            let s = auth.session(principal);
            let mut result = GetSessionOptionsResult::default();
            result.session_options.insert(
                "catalog".into(),
                string_value(principal.tenant.engine.catalog_name()),
            );
            result
                .session_options
                .insert("schema".into(), string_value(s.database));
            result.encode_to_vec()
        }
        "CloseSession" => {
            auth.close(principal);
            CloseSessionResult { status: 1 }.encode_to_vec()
        }
        "CancelFlightInfo" => CancelFlightInfoResult::new(CancelStatus::Cancelled).encode_to_vec(),
        other => {
            return Err(status(
                ErrorKind::Internal,
                format!("'{other}' is not a session action"),
            ))
        }
    };
    Ok(arrow_flight::Result { body: body.into() })
}
