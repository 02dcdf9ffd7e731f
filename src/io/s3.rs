//! Warehouses on S3 and S3-compatible stores (`s3://BUCKET/PREFIX`): the `[storage]` settings, the
//! store they build (object_store's S3 client under the prefix), and the start-up probe that
//! turns an unreachable endpoint, refused credentials, a missing bucket or a read-only bucket into
//! one error naming the warehouse.
//!
//! Settings come from the standard AWS environment variables (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//! `AWS_ALLOW_HTTP`, and every other `AWS_*` key object_store knows), then from `[storage]`, which
//! wins where both say something. Snapshots are created with `If-None-Match: *` (object_store's
//! `PutMode::Create` with the default `etag` conditional put), so two committers never overwrite
//! each other.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::prefix::PrefixStore;
use object_store::{ClientConfigKey, ObjectStore};
use serde::Deserialize;

use crate::error::{invalid, Result};

/// `[storage]`: how object-store warehouses are reached. Every field is optional; the AWS
/// environment variables fill what is not set here.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageOptions {
    /// The S3 endpoint (`AWS_ENDPOINT_URL`), e.g. `http://127.0.0.1:9000` for an S3-compatible
    /// store; AWS's regional endpoint when neither says.
    pub endpoint: Option<String>,
    /// `AWS_REGION` (default `us-east-1`).
    pub region: Option<String>,
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<String>,
    /// `AWS_SESSION_TOKEN` (temporary credentials).
    pub session_token: Option<String>,
    /// `AWS_ALLOW_HTTP`: plain-HTTP endpoints are refused unless this is true.
    pub allow_http: Option<bool>,
    /// Bucket in the host name (`https://BUCKET.s3…`) instead of the path (the default).
    pub virtual_hosted_style: Option<bool>,
    /// Retries of a failed request (default 3).
    pub max_retries: Option<usize>,
    /// No retry starts later than this after the first attempt (default 30).
    pub retry_timeout_seconds: Option<u64>,
    /// TCP connect timeout (default 5).
    pub connect_timeout_seconds: Option<u64>,
    /// Whole-request timeout (default 60).
    pub request_timeout_seconds: Option<u64>,
    /// Memory for immutable metadata files read again and again (snapshots, schemas, manifest
    /// lists, manifests), per warehouse; 0 turns the cache off (default 64).
    pub metadata_cache_mb: Option<u64>,
    /// A local directory for copies of data files read from the store (off when unset; emptied
    /// at start). Give each server its own.
    pub data_cache_dir: Option<String>,
    /// Its bound (default 1024).
    pub data_cache_mb: Option<u64>,
    /// Where compactions keep lookup files (`table::lookup`: the rows of the levels above 0,
    /// decoded, for the `lookup` changelog producer and deletion vectors), in a subdirectory
    /// `lookup-PID` of their own; default: `tidelake-lookup` under the system's temporary
    /// directory.
    pub lookup_dir: Option<String>,
    /// The bound of the process's lookup files (default 8192).
    pub lookup_disk_mb: Option<u64>,
}

/// Where an `s3://` warehouse is: its bucket and the key prefix (no leading or trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    pub prefix: String,
}

impl S3Location {
    /// Parses `s3://BUCKET[/PREFIX]` (also `s3a://`); `None` for other schemes.
    pub fn parse(uri: &str) -> Option<Result<Self>> {
        let rest = uri
            .strip_prefix("s3://")
            .or_else(|| uri.strip_prefix("s3a://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.trim_matches('/');
        let bad_bucket = bucket.len() < 3
            || bucket.len() > 63
            || !bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if bad_bucket {
            return Some(invalid!(
                "warehouse {uri}: '{bucket}' is not an S3 bucket name (3 to 63 of a-z, 0-9, '-', '.')"
            ));
        }
        if prefix
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
            && !prefix.is_empty()
        {
            return Some(invalid!(
                "warehouse {uri}: the key prefix '{prefix}' has an empty, '.' or '..' segment"
            ));
        }
        Some(Ok(Self {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        }))
    }

    /// The canonical URI: `s3://BUCKET/PREFIX` (no trailing `/`).
    pub fn uri(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// The S3 settings object_store is given: the environment's, then `[storage]`'s, then the
/// defaults for what neither sets. Pure (the environment is passed in), so it is tested.
pub(crate) fn settings(
    env: impl IntoIterator<Item = (String, String)>,
    options: &StorageOptions,
) -> Vec<(AmazonS3ConfigKey, String)> {
    let mut out: Vec<(AmazonS3ConfigKey, String)> = Vec::new();
    fn put(out: &mut Vec<(AmazonS3ConfigKey, String)>, key: AmazonS3ConfigKey, value: String) {
        out.retain(|(k, _)| *k != key);
        out.push((key, value));
    }
    let mut set = |key: AmazonS3ConfigKey, value: String| put(&mut out, key, value);
    for (k, v) in env {
        if k.starts_with("AWS_") {
            if let Ok(key) = k.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                set(key, v);
            }
        }
    }
    let o = options;
    let strings = [
        (AmazonS3ConfigKey::Endpoint, &o.endpoint),
        (AmazonS3ConfigKey::Region, &o.region),
        (AmazonS3ConfigKey::AccessKeyId, &o.access_key_id),
        (AmazonS3ConfigKey::SecretAccessKey, &o.secret_access_key),
        (AmazonS3ConfigKey::Token, &o.session_token),
    ];
    for (key, value) in strings {
        if let Some(v) = value {
            set(key, v.clone());
        }
    }
    let client = |k: ClientConfigKey| AmazonS3ConfigKey::Client(k);
    if let Some(b) = o.allow_http {
        set(client(ClientConfigKey::AllowHttp), b.to_string());
    }
    if let Some(b) = o.virtual_hosted_style {
        set(AmazonS3ConfigKey::VirtualHostedStyleRequest, b.to_string());
    }
    let seconds = |s: u64| format!("{s}s");
    set(
        client(ClientConfigKey::ConnectTimeout),
        seconds(o.connect_timeout_seconds.unwrap_or(5)),
    );
    set(
        client(ClientConfigKey::Timeout),
        seconds(o.request_timeout_seconds.unwrap_or(60)),
    );
    if !out.iter().any(|(k, _)| *k == AmazonS3ConfigKey::Region) {
        put(&mut out, AmazonS3ConfigKey::Region, "us-east-1".into());
    }
    out
}

/// What a failed start-up request means, from object_store's text of the error: the cause in
/// words, and the detail (S3's error code and message when the store sent them, else the error on
/// one line). `doing` is said when nothing more precise is known.
pub(crate) fn explain(doing: &str, error: &str) -> (String, String) {
    let tag = |name: &str| xml_tag(error, name);
    let code = tag("Code");
    let what = match code.as_deref() {
        Some("NoSuchBucket") => "the bucket does not exist",
        Some(
            "InvalidAccessKeyId"
            | "SignatureDoesNotMatch"
            | "InvalidToken"
            | "ExpiredToken"
            | "InvalidClientTokenId",
        ) => "the credentials were refused",
        Some("AccessDenied") if doing.starts_with("listing") => "the credentials may not list it",
        _ if error.contains("404 Not Found") && doing.starts_with("listing") => {
            "the bucket does not exist"
        }
        _ if error.contains("403 Forbidden") && doing.starts_with("listing") => {
            "the credentials were refused"
        }
        _ => doing,
    };
    let detail = match (code, tag("Message")) {
        (Some(c), Some(m)) => format!("S3 said {c}: {m}"),
        (Some(c), None) => format!("S3 said {c}"),
        _ => error.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    (what.to_string(), detail)
}

/// The text of the first `<name>…</name>` in `text` (an AWS error body, or an error quoting one),
/// trimmed.
pub(crate) fn xml_tag(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + end].trim().to_string())
}

/// The retry policy of `options`.
fn retry(options: &StorageOptions) -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: options.max_retries.unwrap_or(3),
        retry_timeout: Duration::from_secs(options.retry_timeout_seconds.unwrap_or(30)),
        backoff: object_store::BackoffConfig::default(),
    }
}

/// The store of `location`, its keys relative to the prefix.
pub(crate) fn store(
    location: &S3Location,
    options: &StorageOptions,
) -> Result<Arc<dyn ObjectStore>> {
    let mut builder = AmazonS3Builder::new().with_bucket_name(&location.bucket);
    for (key, value) in settings(std::env::vars(), options) {
        builder = builder.with_config(key, value);
    }
    let s3 = builder.with_retry(retry(options)).build().map_err(|e| {
        crate::error::InvalidArgumentSnafu {
            message: format!("warehouse {}: {e}", location.uri()),
        }
        .build()
    })?;
    Ok(if location.prefix.is_empty() {
        Arc::new(s3)
    } else {
        Arc::new(PrefixStore::new(s3, location.prefix.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_bad_ones_are_refused() {
        let l = S3Location::parse("s3://lake/prod/wh/").unwrap().unwrap();
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("lake", "prod/wh"));
        assert_eq!(l.uri(), "s3://lake/prod/wh");
        let l = S3Location::parse("s3a://lake").unwrap().unwrap();
        assert_eq!((l.prefix.as_str(), l.uri().as_str()), ("", "s3://lake"));
        assert!(S3Location::parse("/tmp/wh").is_none());
        assert!(S3Location::parse("gs://x/y").is_none());
        for bad in [
            "s3://",
            "s3://UPPER/x",
            "s3://a/x",
            "s3://lake/a//b",
            "s3://lake/../x",
        ] {
            let e = S3Location::parse(bad).unwrap().unwrap_err().to_string();
            assert!(
                e.contains(bad.trim_end_matches('/')) || e.contains("s3://"),
                "{e}"
            );
        }
    }

    #[test]
    fn start_up_failures_are_explained() {
        let missing = "Generic S3 error: Error performing list request: Server returned non-2xx status code: 404 Not Found: <?xml version=\"1.0\"?> <Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><RequestId>x</RequestId></Error>";
        assert_eq!(
            explain("listing it failed", missing),
            (
                "the bucket does not exist".to_string(),
                "S3 said NoSuchBucket: The specified bucket does not exist".to_string()
            )
        );
        let bad_key =
            "403 Forbidden: <Error><Code>InvalidAccessKeyId</Code><Message>nope</Message></Error>";
        assert_eq!(
            explain("listing it failed", bad_key).0,
            "the credentials were refused"
        );
        let denied = "403 Forbidden: <Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";
        assert_eq!(
            explain("writing to it failed", denied).0,
            "writing to it failed"
        );
        let (what, detail) = explain(
            "listing it failed",
            "Generic S3 error: error sending request\n for url (http://127.0.0.1:1/)",
        );
        assert_eq!(what, "listing it failed");
        assert!(!detail.contains('\n'), "{detail}");
    }

    #[test]
    fn config_wins_over_the_environment_and_defaults_fill_the_rest() {
        let env = [
            ("AWS_ACCESS_KEY_ID", "env-key"),
            ("AWS_ENDPOINT_URL", "http://env:1"),
            ("AWS_ALLOW_HTTP", "true"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let options = StorageOptions {
            endpoint: Some("http://config:2".into()),
            request_timeout_seconds: Some(7),
            ..Default::default()
        };
        let s = settings(env, &options);
        let get =
            |key: AmazonS3ConfigKey| s.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str());
        assert_eq!(get(AmazonS3ConfigKey::Endpoint), Some("http://config:2"));
        assert_eq!(get(AmazonS3ConfigKey::AccessKeyId), Some("env-key"));
        assert_eq!(get(AmazonS3ConfigKey::Region), Some("us-east-1"));
        assert_eq!(
            get(AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp)),
            Some("true")
        );
        assert_eq!(
            get(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout)),
            Some("7s")
        );
        assert_eq!(
            s.iter()
                .filter(|(k, _)| *k == AmazonS3ConfigKey::Endpoint)
                .count(),
            1
        );
    }
}
