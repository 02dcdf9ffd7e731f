//! Flight's session-option messages (`SetSessionOptions`, `GetSessionOptions`, `CloseSession`),
//! which arrow-flight 59 does not generate; field numbers follow Flight.proto.

use std::collections::HashMap;

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
