//! Data credentials for clients that read and write a table's files themselves (the REST
//! catalog's `GET …/token`): temporary S3 keys from STS `AssumeRole` of a configured role, with a
//! session policy that allows only the table's key prefix. Readers get read-only keys; writers
//! may also put data files, but never the table's metadata (snapshots, schemas, tags, branches),
//! which only the server commits. The server's own keys sign the STS call and are never handed
//! out.
//!
//! This module owns the policy ([`session_policy`]), the STS request and its answer
//! ([`parse_credentials`]), the names under which the keys reach Paimon's clients
//! ([`client_options`]: pypaimon's `fs.s3.*` and Java's `s3.*`), and a cache, so that a table's
//! readers share one set of keys until half of its lifetime is gone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer, AwsCredentialProvider};
use object_store::client::{HttpClient, HttpConnector, HttpRequestBody, ReqwestConnector};
use object_store::{ClientConfigKey, ClientOptions};
use serde::Deserialize;

use super::s3::{settings, xml_tag, S3Location, StorageOptions};
use crate::error::{invalid, of_kind, ErrorKind, Result};

/// What a client may do with the keys it is handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Get and list the table's objects.
    Read,
    /// Also put and delete its data and manifest files.
    Write,
}

/// The table directories a client never writes: the server commits them.
const METADATA_DIRS: [&str; 5] = ["snapshot", "schema", "tag", "branch", "changelog"];

/// Shortest and longest lifetime STS grants a role session.
const MIN_SECONDS: u64 = 900;
const MAX_SECONDS: u64 = 43_200;

/// The IAM session policy of keys for the table under `s3://bucket/key` (its directory, no
/// trailing `/`). Pure, so it is tested.
pub(crate) fn session_policy(bucket: &str, key: &str, access: Access) -> serde_json::Value {
    let objects = format!("arn:aws:s3:::{bucket}/{key}/*");
    let mut statements = vec![
        serde_json::json!({
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [format!("arn:aws:s3:::{bucket}")],
            "Condition": {"StringLike": {"s3:prefix": [key.to_string(), format!("{key}/*")]}},
        }),
        serde_json::json!({
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [objects.clone()],
        }),
    ];
    if access == Access::Write {
        statements.push(serde_json::json!({
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            "Resource": [objects],
        }));
        let metadata: Vec<String> = METADATA_DIRS
            .iter()
            .map(|d| format!("arn:aws:s3:::{bucket}/{key}/{d}/*"))
            .collect();
        statements.push(serde_json::json!({
            "Effect": "Deny",
            "Action": ["s3:PutObject", "s3:DeleteObject"],
            "Resource": metadata,
        }));
    }
    serde_json::json!({"Version": "2012-10-17", "Statement": statements})
}

/// A role session name (`[\w+=,.@-]{2,64}`) that says who asked: CloudTrail shows it.
pub(crate) fn session_name(tenant: &str, subject: &str) -> String {
    let clean: String = format!("tidelake-{tenant}-{subject}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_+=,.@-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    clean
}

/// Temporary keys and when they stop working.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    pub expires_at_millis: i64,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("access_key_id", &self.access_key_id)
            .field("expires_at_millis", &self.expires_at_millis)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResponse {
    assume_role_result: AssumeRoleResult,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResult {
    credentials: Credentials,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Credentials {
    access_key_id: String,
    secret_access_key: String,
    session_token: String,
    expiration: String,
}

/// The keys of an STS `AssumeRole` answer (its XML), or what is wrong with it.
pub(crate) fn parse_credentials(xml: &str) -> std::result::Result<Issued, String> {
    let parsed: AssumeRoleResponse =
        quick_xml::de::from_str(xml).map_err(|e| format!("an answer without credentials: {e}"))?;
    let c = parsed.assume_role_result.credentials;
    let expires = chrono::DateTime::parse_from_rfc3339(&c.expiration)
        .map_err(|e| format!("expiration '{}': {e}", c.expiration))?;
    Ok(Issued {
        access_key_id: c.access_key_id,
        secret_access_key: c.secret_access_key,
        session_token: c.session_token,
        expires_at_millis: expires.timestamp_millis(),
    })
}

/// STS's own words for a refusal (`Code: Message` of its error XML), or the answer cut short.
fn sts_refusal(status: u16, body: &str) -> String {
    let tag = |name: &str| xml_tag(body, name);
    match (tag("Code"), tag("Message")) {
        (Some(c), Some(m)) => format!("HTTP {status}, {c}: {m}"),
        (Some(c), None) => format!("HTTP {status}, {c}"),
        _ => format!(
            "HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        ),
    }
}

/// Where the handed-out keys are used: what a client needs besides them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    /// The S3 endpoint (`None`: AWS's own).
    url: Option<String>,
    region: String,
    path_style: bool,
}

/// The options a Paimon client merges over its catalog options for a table's files: both
/// pypaimon's `fs.s3.*` names and Java's `s3.*` (Paimon's S3 file system hands `s3.X` to Hadoop's
/// S3A as `fs.s3a.X`, so the session token is `s3.session.token` and the provider S3A's
/// temporary-credentials one). Pure, so it is tested.
fn client_options(keys: &Issued, endpoint: &Endpoint) -> BTreeMap<String, String> {
    let mut o = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        o.insert(k.to_string(), v.to_string());
    };
    put("fs.s3.accessKeyId", &keys.access_key_id);
    put("fs.s3.accessKeySecret", &keys.secret_access_key);
    put("fs.s3.securityToken", &keys.session_token);
    put("fs.s3.region", &endpoint.region);
    put("s3.access-key", &keys.access_key_id);
    put("s3.secret-key", &keys.secret_access_key);
    put("s3.session.token", &keys.session_token);
    put(
        "s3.aws.credentials.provider",
        "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
    );
    put("s3.endpoint.region", &endpoint.region);
    if let Some(url) = &endpoint.url {
        put("fs.s3.endpoint", url);
        put("s3.endpoint", url);
    }
    if endpoint.path_style {
        put("fs.s3.path-style-access", "true");
        put("s3.path-style-access", "true");
    }
    o
}

/// `[rest] data_token_*`: which role the keys come from and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataTokenOptions {
    /// The role assumed (`arn:aws:iam::ACCOUNT:role/NAME`); the server's credentials must be
    /// allowed `sts:AssumeRole` on it.
    pub role_arn: String,
    /// The keys' lifetime (900 to 43200 seconds; default 3600).
    pub seconds: Option<u64>,
    /// STS's endpoint; default `AWS_ENDPOINT_URL_STS`, then the S3 endpoint when one is set (MinIO
    /// and other S3-compatible stores serve STS there), then AWS's regional STS.
    pub sts_endpoint: Option<String>,
}

/// Issues data credentials for tables of `s3://` warehouses.
#[derive(Debug)]
pub struct DataTokens {
    role_arn: String,
    duration: Duration,
    sts_url: String,
    endpoint: Endpoint,
    credentials: AwsCredentialProvider,
    client: HttpClient,
    cache: moka::future::Cache<(String, Access, String), Arc<Issued>>,
}

impl DataTokens {
    /// The issuer for `options`, signing with the credentials `storage` (and the AWS environment)
    /// give the server's own store.
    pub fn new(options: &DataTokenOptions, storage: &StorageOptions) -> Result<Self> {
        let seconds = options.seconds.unwrap_or(3600);
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
            return invalid!(
                "config: [rest] data_token_seconds must be {MIN_SECONDS} to {MAX_SECONDS}, not {seconds}"
            );
        }
        if !options.role_arn.starts_with("arn:") {
            return invalid!(
                "config: [rest] data_token_role_arn '{}' is not a role ARN",
                options.role_arn
            );
        }
        let settings = settings(std::env::vars(), storage);
        let get = |key: AmazonS3ConfigKey| {
            settings
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        };
        let region = get(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let url = get(AmazonS3ConfigKey::Endpoint);
        // object_store addresses buckets by path unless told otherwise; AWS's own endpoint is
        // left to the client's default.
        let path_style = url.is_some()
            && get(AmazonS3ConfigKey::VirtualHostedStyleRequest).as_deref() != Some("true");
        let allow_http =
            get(AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp)).as_deref() == Some("true");
        let sts_url = options
            .sts_endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_STS").ok())
            .or_else(|| url.clone())
            .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
        // The server's own credential chain (keys, web identity, instance metadata), as its store
        // resolves them; the bucket name only satisfies the builder.
        let mut builder = AmazonS3Builder::new().with_bucket_name("tidelake-data-tokens");
        for (key, value) in &settings {
            builder = builder.with_config(*key, value);
        }
        let config_error = |e: object_store::Error| {
            crate::error::InvalidArgumentSnafu {
                message: format!("config: [rest] data tokens: {e}"),
            }
            .build()
        };
        let credentials = Arc::clone(builder.build().map_err(config_error)?.credentials());
        // A plain-HTTP STS endpoint named in the config is meant (a local S3-compatible store).
        let allow_http = allow_http
            || options
                .sts_endpoint
                .as_deref()
                .is_some_and(|u| u.starts_with("http://"));
        let client = ReqwestConnector::default()
            .connect(
                &ClientOptions::new()
                    .with_allow_http(allow_http)
                    .with_timeout(Duration::from_secs(30)),
            )
            .map_err(config_error)?;
        let duration = Duration::from_secs(seconds);
        Ok(Self {
            role_arn: options.role_arn.clone(),
            duration,
            sts_url,
            endpoint: Endpoint {
                url,
                region,
                path_style,
            },
            credentials,
            client,
            cache: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(duration / 2)
                .build(),
        })
    }

    /// The options a client needs for the files of the table at `table_uri` (`s3://…`), and when
    /// they expire. `session` names the asker (see [`session_name`]).
    pub async fn issue(
        &self,
        table_uri: &str,
        access: Access,
        session: &str,
    ) -> Result<(BTreeMap<String, String>, i64)> {
        let location = match S3Location::parse(table_uri) {
            Some(l) => l?,
            None => {
                return Err(of_kind(
                    ErrorKind::Unsupported,
                    format!("{table_uri}: data tokens are for s3:// warehouses only"),
                ))
            }
        };
        let key = (table_uri.to_string(), access, session.to_string());
        let keys = self
            .cache
            .try_get_with(key, async {
                self.assume(&location, access, session).await.map(Arc::new)
            })
            .await
            .map_err(|e: Arc<crate::error::Error>| of_kind(e.kind(), e.to_string()))?;
        Ok((
            client_options(&keys, &self.endpoint),
            keys.expires_at_millis,
        ))
    }

    async fn assume(&self, location: &S3Location, access: Access, session: &str) -> Result<Issued> {
        let unavailable = |what: String| {
            of_kind(
                ErrorKind::Unavailable,
                format!("data token for {}: STS AssumeRole: {what}", location.uri()),
            )
        };
        let policy = session_policy(&location.bucket, &location.prefix, access).to_string();
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("Action", "AssumeRole")
            .append_pair("Version", "2011-06-15")
            .append_pair("RoleArn", &self.role_arn)
            .append_pair("RoleSessionName", session)
            .append_pair("DurationSeconds", &self.duration.as_secs().to_string())
            .append_pair("Policy", &policy)
            .finish();
        let credential = self
            .credentials
            .get_credential()
            .await
            .map_err(|e| unavailable(format!("the server's own credentials: {e}")))?;
        let mut request = http::Request::post(&self.sts_url)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(HttpRequestBody::from(form))
            .map_err(|e| unavailable(format!("endpoint '{}': {e}", self.sts_url)))?;
        AwsAuthorizer::new(&credential, "sts", &self.endpoint.region).authorize(&mut request, None);
        let response = self
            .client
            .execute(request)
            .await
            .map_err(|e| unavailable(format!("{} unreachable: {e}", self.sts_url)))?;
        let status = response.status();
        let body = response
            .into_body()
            .bytes()
            .await
            .map_err(|e| unavailable(format!("the answer was cut short: {e}")))?;
        let body = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(unavailable(sts_refusal(status.as_u16(), &body)));
        }
        parse_credentials(&body).map_err(unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_get_and_list_only_their_table() {
        let p = session_policy("bkt", "wh/db.db/t", Access::Read);
        let statements = p["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 2);
        let actions: Vec<&str> = statements
            .iter()
            .flat_map(|s| s["Action"].as_array().unwrap())
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(actions, ["s3:ListBucket", "s3:GetObject"]);
        assert_eq!(
            statements[0]["Condition"]["StringLike"]["s3:prefix"],
            serde_json::json!(["wh/db.db/t", "wh/db.db/t/*"])
        );
        assert_eq!(
            statements[1]["Resource"],
            serde_json::json!(["arn:aws:s3:::bkt/wh/db.db/t/*"])
        );
    }

    #[test]
    fn writers_put_data_but_never_metadata() {
        let p = session_policy("bkt", "db.db/t", Access::Write);
        let statements = p["Statement"].as_array().unwrap();
        let allow_put = &statements[2];
        assert_eq!(allow_put["Effect"], "Allow");
        assert_eq!(
            allow_put["Resource"],
            serde_json::json!(["arn:aws:s3:::bkt/db.db/t/*"])
        );
        let deny = &statements[3];
        assert_eq!(deny["Effect"], "Deny");
        let denied: Vec<&str> = deny["Resource"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(denied.contains(&"arn:aws:s3:::bkt/db.db/t/snapshot/*"));
        assert!(denied.contains(&"arn:aws:s3:::bkt/db.db/t/schema/*"));
        assert!(denied.contains(&"arn:aws:s3:::bkt/db.db/t/branch/*"));
        // Another table with the same name prefix is not covered: the resource ends in `/*`.
        assert!(!denied.iter().any(|r| r.contains("t2")));
    }

    #[test]
    fn session_names_are_what_sts_accepts() {
        assert_eq!(session_name("acme", "ann"), "tidelake-acme-ann");
        assert_eq!(
            session_name("acme", "https://idp/ann bob"),
            "tidelake-acme-https___idp_ann_bob"
        );
        assert_eq!(session_name("t", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn sts_answers_are_parsed_and_refusals_explained() {
        let xml = r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn><AssumedRoleId>A:s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
      <SecretAccessKey>secret</SecretAccessKey>
      <SessionToken>tok</SessionToken>
      <Expiration>2026-12-05T21:00:00Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>
</AssumeRoleResponse>"#;
        let issued = parse_credentials(xml).unwrap();
        assert_eq!(issued.access_key_id, "ASIAEXAMPLE");
        assert_eq!(issued.session_token, "tok");
        assert_eq!(issued.expires_at_millis, 1_796_504_400_000);
        assert!(!format!("{issued:?}").contains("secret"));
        assert!(parse_credentials("<ErrorResponse/>").is_err());
        assert_eq!(
            sts_refusal(
                403,
                "<ErrorResponse><Error><Code>AccessDenied</Code><Message>not allowed</Message></Error></ErrorResponse>"
            ),
            "HTTP 403, AccessDenied: not allowed"
        );
    }

    #[test]
    fn both_client_families_get_keys_and_the_endpoint() {
        let keys = Issued {
            access_key_id: "A".into(),
            secret_access_key: "S".into(),
            session_token: "T".into(),
            expires_at_millis: 1,
        };
        let endpoint = Endpoint {
            url: Some("http://127.0.0.1:9000".into()),
            region: "eu-west-1".into(),
            path_style: true,
        };
        let o = client_options(&keys, &endpoint);
        for (k, v) in [
            ("fs.s3.accessKeyId", "A"),
            ("fs.s3.accessKeySecret", "S"),
            ("fs.s3.securityToken", "T"),
            ("fs.s3.endpoint", "http://127.0.0.1:9000"),
            ("fs.s3.region", "eu-west-1"),
            ("s3.access-key", "A"),
            ("s3.secret-key", "S"),
            ("s3.session.token", "T"),
            ("s3.endpoint", "http://127.0.0.1:9000"),
            ("s3.path-style-access", "true"),
        ] {
            assert_eq!(o.get(k).map(String::as_str), Some(v), "{k}");
        }
        let aws = client_options(
            &keys,
            &Endpoint {
                url: None,
                region: "us-east-1".into(),
                path_style: false,
            },
        );
        assert!(!aws.contains_key("fs.s3.endpoint"));
        assert!(!aws.contains_key("s3.path-style-access"));
    }
}
