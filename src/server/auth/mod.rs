//! Who is calling: the one place a request's credentials become a [`Principal`].
//!
//! - `Basic` credentials (in the Handshake payload, or in an `authorization` header) are checked
//!   against the configured users' argon2 hashes ([`password`]) and answered with a minted token
//!   ([`token`]): a JWT signed with the deployment's key, so any server sharing that key accepts
//!   it and none keeps anything per token.
//! - `Bearer` tokens are verified on every call; nothing is looked up but the revocations of
//!   `CloseSession` on this server.
//! - Session options (the current database) are the only per-token state, kept per server in a
//!   bounded map keyed by a hash of the token; a session a server never saw starts in `default`.
//!
//! The gate (`super::gate`) calls [`Authenticator::resolve`] once per RPC, before the request
//! body is read; the REST catalog once per request. Refusals are the crate's errors
//! (Unauthenticated, or PermissionDenied for a tenant not served here), which each door maps to
//! its protocol once (`server/status.rs` for gRPC, the REST catalog's `RestError`). This module
//! imports nothing of the doors: below it are only the principal and the tenants.

pub mod issuer;
pub mod password;
pub mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use sha2::Digest;
use snafu::IntoError;

// Re-exported for the doors that name it through `auth` (the REST catalog).
pub use super::principal::Principal;
use super::principal::SessionKey;
use super::tenant::{Tenant, Tenants};
use crate::error::{Error, ErrorKind, Result};
use crate::sql::{Role, SqlSession};
use password::Credential;
use token::{Keys, Refusal};

/// Standard base64 that accepts both padded and unpadded input (the ADBC driver sends unpadded).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Sessions with options set that one server keeps at most (older ones are dropped first).
const MAX_SESSIONS: usize = 100_000;

/// Verified tokens one server remembers at most ([`Authenticator::verify`]).
const MAX_VERIFIED: u64 = 10_000;

/// How long a token this deployment minted is taken without checking its signature again
/// (never past its `exp`). Within it a point query's three calls verify the token once instead
/// of three times (HMAC, base64 and JSON each). Identity providers' tokens are checked on every
/// call, so a key dropped from a JWKS file stops its tokens as soon as the file is re-read.
const VERIFIED_FOR: Duration = Duration::from_secs(30);

/// Expires a remembered principal [`VERIFIED_FOR`] after it was verified, or a second before
/// its token does, whichever is first (`exp` counts whole seconds: the second absorbs the
/// rounding, so no token is taken past its `exp`).
struct UntilExpiry;

impl moka::Expiry<[u8; 32], Principal> for UntilExpiry {
    fn expire_after_create(
        &self,
        _token: &[u8; 32],
        principal: &Principal,
        _now: std::time::Instant,
    ) -> Option<Duration> {
        Some(remembered_for(principal.expires_at, token::unix_now()))
    }
}

/// How long a principal whose token expires at `exp` is remembered at `now` (unix seconds).
fn remembered_for(exp: u64, now: u64) -> Duration {
    Duration::from_secs(exp.saturating_sub(now).saturating_sub(1)).min(VERIFIED_FOR)
}

/// A principal, and the token to send back when it was resolved from a password.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub principal: Principal,
    pub minted: Option<String>,
}

/// A configured user.
#[derive(Debug, Clone)]
pub struct User {
    pub credential: Credential,
    pub role: Role,
    /// The tenant the user belongs to.
    pub tenant: String,
}

/// `[auth]`: how tokens and tickets are signed and how long they live.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// 32 or more random bytes (raw, or as hex), shared by the servers of one deployment so
    /// that each accepts the others' tokens and tickets; without it a key is generated at start.
    pub signing_key_file: Option<String>,
    /// Lifetime of the tokens a Basic handshake mints (default 3600).
    pub token_ttl_seconds: Option<u64>,
    /// Lifetime of DoGet tickets and prepared-statement handles (default 3600).
    pub ticket_ttl_seconds: Option<u64>,
    /// `[[auth.issuers]]`: identity providers whose JWTs are accepted as bearer tokens.
    #[serde(default)]
    pub issuers: Vec<issuer::IssuerConfig>,
}

/// Token settings (`[auth]`), resolved.
#[derive(Debug, Clone)]
pub struct AuthOptions {
    /// The contents of `signing_key_file`, parsed; `None` generates a key at start.
    pub keys: Option<Keys>,
    /// Lifetime of minted tokens (`token_ttl_seconds`).
    pub token_ttl: Duration,
    /// Lifetime of tickets and prepared-statement handles (`ticket_ttl_seconds`).
    pub ticket_ttl: Duration,
    /// Identity providers whose bearer tokens are accepted (`[[auth.issuers]]`).
    pub issuers: Vec<issuer::IssuerConfig>,
}

impl Default for AuthOptions {
    fn default() -> Self {
        Self {
            keys: None,
            token_ttl: Duration::from_secs(3600),
            ticket_ttl: Duration::from_secs(3600),
            issuers: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
struct Sessions {
    /// Current database and expiry (the token's) by session.
    databases: HashMap<SessionKey, (String, u64)>,
    /// Tokens ended by CloseSession on this server, until they expire.
    revoked: HashMap<SessionKey, u64>,
}

/// Users, keys and sessions.
#[derive(Debug)]
pub struct Authenticator {
    users: HashMap<String, User>,
    keys: Keys,
    options: AuthOptions,
    issuers: Vec<issuer::Issuer>,
    tenants: Arc<Tenants>,
    sessions: Mutex<Sessions>,
    /// Principals of recently verified bearer tokens, by SHA-256 of the token.
    verified: moka::sync::Cache<[u8; 32], Principal>,
    /// Password checks running at once (each argon2 check holds 19 MiB and a core for tens
    /// of milliseconds).
    logins: tokio::sync::Semaphore,
    default_database: String,
    /// The algorithms a bearer token may use (minted tokens' and the issuers'), as a refusal
    /// names them: `HS256/RS256/...`.
    algorithms: String,
}

/// An Unauthenticated error: credentials missing, malformed or refused.
#[track_caller]
fn unauthenticated(message: impl Into<String>) -> Error {
    crate::error::of_kind(ErrorKind::Unauthenticated, message)
}

/// The error of a refused bearer token.
#[track_caller]
fn refused(r: Refusal) -> Error {
    unauthenticated(r.to_string())
}

/// A PermissionDenied error: the credentials are good, but they reach nothing here.
#[track_caller]
fn denied(message: impl Into<String>) -> Error {
    crate::error::of_kind(ErrorKind::PermissionDenied, message)
}

impl Authenticator {
    pub fn new(
        users: HashMap<String, User>,
        options: AuthOptions,
        tenants: Arc<Tenants>,
    ) -> crate::error::Result<Self> {
        for (name, u) in &users {
            if tenants.get(&u.tenant).is_none() {
                return crate::error::invalid!(
                    "config: user '{name}' belongs to tenant '{}', which is not configured",
                    u.tenant
                );
            }
        }
        let keys = match &options.keys {
            Some(k) => k.clone(),
            None => Keys::generate()?,
        };
        let mut issuers: Vec<issuer::Issuer> = Vec::new();
        for c in &options.issuers {
            let i = issuer::Issuer::new(c, |name| std::env::var(name).ok())?;
            if issuers.iter().any(|o| o.issuer == i.issuer) {
                return crate::error::invalid!("config: issuer '{}' is listed twice", i.issuer);
            }
            issuers.push(i);
        }
        let mut algorithms = vec![token::MINTED_ALGORITHM.to_string()];
        for a in issuers.iter().flat_map(|i| i.algorithms()) {
            let name = format!("{a:?}");
            if !algorithms.contains(&name) {
                algorithms.push(name);
            }
        }
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Ok(Self {
            users,
            keys,
            options,
            issuers,
            tenants,
            sessions: Mutex::default(),
            verified: moka::sync::Cache::builder()
                .max_capacity(MAX_VERIFIED)
                .expire_after(UntilExpiry)
                .build(),
            logins: tokio::sync::Semaphore::new(cores.max(2)),
            default_database: "default".into(),
            algorithms: algorithms.join("/"),
        })
    }

    /// The deployment's keys (tickets are sealed with a subkey).
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// How long tickets and prepared-statement handles stay valid.
    /// The tenants served (each a catalog).
    pub fn tenants(&self) -> &Tenants {
        &self.tenants
    }

    pub fn ticket_ttl(&self) -> Duration {
        self.options.ticket_ttl
    }

    /// The principal of a request's `authorization` header: a `Bearer` token, or `Basic`
    /// credentials (answered with a minted token).
    pub async fn resolve(&self, header: Option<&http::HeaderValue>) -> Result<Resolved> {
        let Some(value) = header else {
            return Err(unauthenticated(
                "no credentials: authenticate with a Basic handshake, then send 'authorization: Bearer <token>'",
            ));
        };
        if value.len() > token::MAX_TOKEN_LEN + 16 {
            return Err(unauthenticated("authorization header too long"));
        }
        let value = value
            .to_str()
            .map_err(|_| unauthenticated("malformed authorization header"))?;
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            let principal = self.verify(rest.trim())?;
            return Ok(Resolved {
                principal,
                minted: None,
            });
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let (user, password) = parse_basic(rest)?;
            return self.login(&user, &password).await;
        }
        Err(unauthenticated(
            "expected 'authorization: Basic <credentials>' or 'Bearer <token>'",
        ))
    }

    /// Checks a user name and password and mints a token.
    pub async fn login(&self, user: &str, password: &str) -> Result<Resolved> {
        let _permit = self
            .logins
            .acquire()
            .await
            .map_err(|_| unauthenticated("the server is shutting down"))?;
        let ok = match self.users.get(user).map(|u| u.credential.clone()) {
            Some(Credential::Plain(p)) => Credential::Plain(p).verify(password),
            Some(c) => {
                let password = password.to_string();
                tokio::task::spawn_blocking(move || c.verify(&password))
                    .await
                    .unwrap_or(false)
            }
            None => {
                let password = password.to_string();
                tokio::task::spawn_blocking(move || password::verify_unknown(&password))
                    .await
                    .unwrap_or(false)
            }
        };
        let Some(found) = self.users.get(user).filter(|_| ok) else {
            tracing::warn!(user, "failed login");
            return Err(unauthenticated("invalid user name or password"));
        };
        self.mint(user, &found.tenant, found.role)
    }

    /// A fresh token for `subject`.
    fn mint(&self, subject: &str, tenant: &str, role: Role) -> Result<Resolved> {
        let tenant = self.tenant(tenant)?;
        let (token, claims) = token::mint(
            &self.keys,
            subject,
            &tenant.name,
            role,
            token::unix_now(),
            self.options.token_ttl.as_secs(),
        )?;
        Ok(Resolved {
            principal: Principal {
                tenant,
                subject: claims.sub,
                issuer: Arc::from(token::MINTED_ISSUER),
                role,
                session: session_key(&token),
                expires_at: claims.exp,
            },
            minted: Some(token),
        })
    }

    /// The principal of a bearer token: one tidelake minted, or an identity provider's. A minted
    /// token verified in the last [`VERIFIED_FOR`] is taken as it was then, up to its `exp`; a
    /// closed session is refused either way.
    fn verify(&self, token: &str) -> Result<Principal> {
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let principal = match self.verified.get(&digest) {
            Some(p) => p,
            None => {
                let p = self.verify_signed(token)?;
                // Only tokens this deployment minted: its keys never change while it runs,
                // while an identity provider's JWKS file may drop a key at any moment.
                if &*p.issuer == token::MINTED_ISSUER
                    && !remembered_for(p.expires_at, token::unix_now()).is_zero()
                {
                    self.verified.insert(digest, p.clone());
                }
                p
            }
        };
        if self.lock().revoked.contains_key(&principal.session) {
            return Err(refused(Refusal::new("the session was closed")));
        }
        Ok(principal)
    }

    /// [`Authenticator::verify`] without the remembered tokens and the closed sessions.
    fn verify_signed(&self, token: &str) -> Result<Principal> {
        #[derive(serde::Deserialize)]
        struct Peek {
            iss: Option<String>,
        }
        let header = token::check_header(token, &self.algorithms).map_err(refused)?;
        // Only to choose whose keys check the signature; nothing else is read unverified.
        let iss = jsonwebtoken::dangerous::insecure_decode_claims::<Peek>(token)
            .map_err(|_| refused(Refusal::new("malformed token")))?
            .iss;
        let session = session_key(token);
        let principal = match iss.as_deref() {
            None => return Err(refused(Refusal::new("token lacks the 'iss' claim"))),
            Some(token::MINTED_ISSUER) => {
                let claims = token::verify(&self.keys, token).map_err(refused)?;
                let role = claims
                    .role()
                    .ok_or_else(|| refused(Refusal::new("the token grants no tidelake role")))?;
                Principal {
                    tenant: self.tenant(&claims.tenant)?,
                    subject: claims.sub,
                    issuer: Arc::from(token::MINTED_ISSUER),
                    role,
                    session,
                    expires_at: claims.exp,
                }
            }
            Some(name) => {
                let Some(issuer) = self.issuers.iter().find(|i| i.issuer == name) else {
                    return Err(refused(Refusal::new("unknown issuer")));
                };
                let id = issuer.verify(token, &header).map_err(refused)?;
                let tenant = match (id.tenant.as_deref(), self.tenants.implicit()) {
                    (None, true) => self.tenant(crate::sql::CATALOG_NAME)?,
                    (None, false) => return Err(denied("the token names no tenant")),
                    (Some(t), _) => self.tenant(t)?,
                };
                Principal {
                    tenant,
                    subject: id.subject,
                    issuer: Arc::from(issuer.issuer.as_str()),
                    role: id
                        .role
                        .ok_or_else(|| denied("the token grants no tidelake role"))?,
                    session,
                    expires_at: id.expires_at,
                }
            }
        };
        Ok(principal)
    }

    /// The tenant a verified token or a user names.
    fn tenant(&self, name: &str) -> Result<Arc<Tenant>> {
        self.tenants.get(name).ok_or_else(|| {
            let shown: String = name.chars().take(64).collect();
            denied(format!("tenant '{shown}' is not served here"))
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session of a principal: its current database (on this server) and its role.
    pub fn session(&self, principal: &Principal) -> SqlSession {
        let database = self
            .lock()
            .databases
            .get(&principal.session)
            .map(|(db, _)| db.clone())
            .unwrap_or_else(|| self.default_database.clone());
        SqlSession {
            database,
            role: principal.role,
        }
    }

    /// Changes the current database of a principal's session.
    pub fn set_database(&self, principal: &Principal, database: String) {
        let now = token::unix_now();
        let mut s = self.lock();
        if s.databases.len() >= MAX_SESSIONS {
            s.databases.retain(|_, (_, exp)| *exp > now);
            while s.databases.len() >= MAX_SESSIONS {
                let Some(oldest) = s
                    .databases
                    .iter()
                    .min_by_key(|(_, (_, exp))| *exp)
                    .map(|(k, _)| *k)
                else {
                    break;
                };
                s.databases.remove(&oldest);
            }
        }
        s.databases
            .insert(principal.session, (database, principal.expires_at));
    }

    /// Ends a session: its token stops working on this server.
    pub fn close(&self, principal: &Principal) {
        let now = token::unix_now();
        let mut s = self.lock();
        s.databases.remove(&principal.session);
        s.revoked.retain(|_, exp| *exp + 60 > now);
        s.revoked.insert(principal.session, principal.expires_at);
    }
}

fn session_key(token: &str) -> SessionKey {
    let digest = sha2::Sha256::digest(token.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// The user name and password of `Basic` credentials (base64 of `user:password`).
fn parse_basic(encoded: &str) -> Result<(String, String)> {
    let malformed = || unauthenticated("malformed Basic credentials");
    let decoded = LENIENT.decode(encoded.trim()).map_err(|_| malformed())?;
    let text = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (user, password) = text.split_once(':').ok_or_else(malformed)?;
    Ok((user.to_string(), password.to_string()))
}

/// `[auth]`, with the signing key read and checked.
impl AuthOptions {
    pub(crate) fn from_config(config: &AuthConfig) -> crate::error::Result<Self> {
        let defaults = AuthOptions::default();
        let keys = match &config.signing_key_file {
            None => None,
            Some(path) => {
                #[allow(clippy::disallowed_methods)] // One small file read at start-up.
                let bytes = std::fs::read(path).map_err(|e| {
                    crate::error::LocalIoSnafu {
                        path: format!("signing_key_file {path}"),
                    }
                    .into_error(e)
                })?;
                Some(Keys::from_file_contents(path, &bytes)?)
            }
        };
        let seconds = |v: Option<u64>, key: &str, default: Duration| match v {
            Some(0) => crate::error::invalid!("config: [auth] {key} must be at least 1"),
            Some(s) => Ok(Duration::from_secs(s)),
            None => Ok(default),
        };
        Ok(AuthOptions {
            keys,
            token_ttl: seconds(
                config.token_ttl_seconds,
                "token_ttl_seconds",
                defaults.token_ttl,
            )?,
            ticket_ttl: seconds(
                config.ticket_ttl_seconds,
                "ticket_ttl_seconds",
                defaults.ticket_ttl,
            )?,
            issuers: config.issuers.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::CATALOG_NAME;

    fn authenticator() -> Authenticator {
        let users = HashMap::from([
            (
                "alice".to_string(),
                User {
                    credential: Credential::Hash(password::hash_password("s3cret").unwrap()),
                    role: Role::Reader,
                    tenant: CATALOG_NAME.into(),
                },
            ),
            (
                "bob".to_string(),
                User {
                    credential: Credential::Plain("pw1".into()),
                    role: Role::Admin,
                    tenant: CATALOG_NAME.into(),
                },
            ),
        ]);
        Authenticator::new(
            users,
            AuthOptions::default(),
            Arc::new(Tenants::in_memory()),
        )
        .unwrap()
    }

    fn header(v: &str) -> http::HeaderValue {
        http::HeaderValue::from_str(v).unwrap()
    }

    #[tokio::test]
    async fn basic_padded_and_unpadded_then_bearer() {
        let a = authenticator();
        let padded = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        let r = a.resolve(Some(&header(&format!("Basic {padded}")))).await;
        assert_eq!(r.unwrap().principal.role, Role::Reader);
        let padded = base64::engine::general_purpose::STANDARD.encode("bob:pw1");
        assert!(padded.ends_with('='));
        for creds in [padded.as_str(), padded.trim_end_matches('=')] {
            let r = a.resolve(Some(&header(&format!("basic {creds}")))).await;
            assert!(r.unwrap().minted.is_some());
        }
        let wrong = base64::engine::general_purpose::STANDARD.encode("bob:pw2");
        let e = a
            .resolve(Some(&header(&format!("Basic {wrong}"))))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unauthenticated);
        assert_eq!(e.to_string(), "invalid user name or password");
        let e = a.login("nobody", "pw1").await.unwrap_err();
        assert_eq!(e.to_string(), "invalid user name or password");

        let token = a.login("bob", "pw1").await.unwrap().minted.unwrap();
        let bearer = header(&format!("Bearer {token}"));
        let p = a.resolve(Some(&bearer)).await.unwrap().principal;
        assert_eq!((p.subject.as_str(), p.role), ("bob", Role::Admin));
        assert_eq!(p.tenant.name, CATALOG_NAME);
        // Session options are per token; CloseSession ends the token here.
        a.set_database(&p, "sales".into());
        assert_eq!(a.session(&p).database, "sales");
        let other = a.login("bob", "pw1").await.unwrap().principal;
        assert_eq!(a.session(&other).database, "default");
        a.close(&p);
        let e = a.resolve(Some(&bearer)).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid bearer token: the session was closed"
        );
        assert!(a.resolve(None).await.is_err());
        assert!(a.resolve(Some(&header("Token x"))).await.is_err());
    }

    #[test]
    fn a_verified_token_is_remembered_for_a_while_and_never_past_its_exp() {
        assert_eq!(remembered_for(1_000_000, 1_000), VERIFIED_FOR);
        assert_eq!(remembered_for(1_005, 1_000), Duration::from_secs(4));
        assert!(remembered_for(1_001, 1_000).is_zero());
        assert!(remembered_for(1_000, 1_000).is_zero());
        assert!(
            remembered_for(990, 1_000).is_zero(),
            "within a leeway: not remembered"
        );
    }

    #[tokio::test]
    async fn a_remembered_token_does_not_vouch_for_an_altered_one() {
        let a = authenticator();
        let token = a.login("bob", "pw1").await.unwrap().minted.unwrap();
        for _ in 0..2 {
            let p = a.resolve(Some(&header(&format!("Bearer {token}")))).await;
            assert_eq!(p.unwrap().principal.subject, "bob");
        }
        // The same claims, another signature: not the remembered token.
        let (signed, sig) = token.rsplit_once('.').unwrap();
        let flipped = if sig.starts_with('A') { "B" } else { "A" };
        let forged = format!("{signed}.{flipped}{}", &sig[1..]);
        let e = a
            .resolve(Some(&header(&format!("Bearer {forged}"))))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unauthenticated);
    }

    #[tokio::test]
    async fn an_alg_none_token_is_refused_naming_the_check() {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let a = authenticator();
        let part = |v: serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let claims = serde_json::json!({"iss": "tidelake", "aud": "tidelake", "sub": "bob",
            "tenant": CATALOG_NAME, "roles": ["admin"], "exp": token::unix_now() + 60});
        let none = format!(
            "{}.{}.",
            part(serde_json::json!({"alg": "none", "typ": "JWT"})),
            part(claims)
        );
        let e = a
            .resolve(Some(&header(&format!("Bearer {none}"))))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unauthenticated);
        assert_eq!(
            e.to_string(),
            "invalid bearer token: token algorithm 'none' is not allowed (expected HS256)"
        );
        // As the gate sends it: one line, Unauthenticated.
        let s = crate::server::status::to_status(e);
        assert_eq!(s.code(), tonic::Code::Unauthenticated);
        assert!(!s.message().contains('\n'));
    }

    #[tokio::test]
    async fn servers_with_one_key_accept_each_others_tokens() {
        let keys = Keys::from_master(&[9; 32]).unwrap();
        let opts = || AuthOptions {
            keys: Some(keys.clone()),
            ..AuthOptions::default()
        };
        let users = || {
            HashMap::from([(
                "bob".to_string(),
                User {
                    credential: Credential::Plain("pw".into()),
                    role: Role::Writer,
                    tenant: CATALOG_NAME.into(),
                },
            )])
        };
        let tenants = Arc::new(Tenants::in_memory());
        let a = Authenticator::new(users(), opts(), Arc::clone(&tenants)).unwrap();
        let b = Authenticator::new(users(), opts(), Arc::clone(&tenants)).unwrap();
        let c = Authenticator::new(users(), AuthOptions::default(), tenants).unwrap();
        let token = a.login("bob", "pw").await.unwrap().minted.unwrap();
        let bearer = header(&format!("Bearer {token}"));
        assert_eq!(
            b.resolve(Some(&bearer)).await.unwrap().principal.role,
            Role::Writer
        );
        let e = c.resolve(Some(&bearer)).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid bearer token: signed by another deployment's key"
        );
        assert!(!e.to_string().contains(&token));
    }
}
