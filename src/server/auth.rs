//! Authentication until the auth issue lands: users from the config (argon2 hashes, see
//! [`super::password`]) or one from the environment, a Basic handshake that mints a random bearer
//! token, and per-token sessions
//! (current database). Tokens are random 256-bit values kept in memory; they expire after
//! [`TOKEN_IDLE`] without use and on restart.

use crate::error::ErrorKind;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::password::Credential;
use crate::sql::{Role, SqlSession};

/// How long an unused token stays valid.
pub const TOKEN_IDLE: Duration = Duration::from_secs(12 * 3600);

/// Standard base64 that accepts both padded and unpadded input (the ADBC driver sends unpadded).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The caller of one request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub user: String,
    pub token: String,
}

#[derive(Debug)]
struct Entry {
    user: String,
    session: SqlSession,
    last_used: Instant,
}

/// Users, tokens and sessions.
#[derive(Debug)]
pub struct Authenticator {
    users: HashMap<String, Credential>,
    /// Users not named here are admins.
    roles: HashMap<String, Role>,
    tokens: Mutex<HashMap<String, Entry>>,
    default_database: String,
}

impl Authenticator {
    pub fn new(users: HashMap<String, Credential>, default_database: String) -> Self {
        Self {
            users,
            roles: HashMap::new(),
            tokens: Mutex::new(HashMap::new()),
            default_database,
        }
    }

    /// The users' roles (by name; others are admins).
    pub fn with_roles(mut self, roles: HashMap<String, Role>) -> Self {
        self.roles = roles;
        self
    }

    fn check_password(&self, user: &str, password: &str) -> bool {
        match self.users.get(user) {
            Some(c) => c.verify(password),
            None => super::password::verify_unknown(password),
        }
    }

    /// Checks `Basic` credentials and opens a session; returns its token.
    pub fn login_basic(&self, header_value: &str) -> Result<Principal, Status> {
        let encoded = header_value
            .strip_prefix("Basic ")
            .or_else(|| header_value.strip_prefix("basic "))
            .ok_or_else(|| {
                super::status::status(ErrorKind::Unauthenticated, "expected Basic credentials")
            })?;
        let decoded = LENIENT.decode(encoded.trim()).map_err(|_| {
            super::status::status(ErrorKind::Unauthenticated, "malformed Basic credentials")
        })?;
        let text = String::from_utf8(decoded).map_err(|_| {
            super::status::status(ErrorKind::Unauthenticated, "malformed Basic credentials")
        })?;
        let (user, password) = text.split_once(':').ok_or_else(|| {
            super::status::status(ErrorKind::Unauthenticated, "malformed Basic credentials")
        })?;
        self.login(user, password)
    }

    /// Checks a user name and password and opens a session.
    pub fn login(&self, user: &str, password: &str) -> Result<Principal, Status> {
        if !self.check_password(user, password) {
            tracing::warn!(user, "failed login");
            return Err(super::status::status(
                ErrorKind::Unauthenticated,
                "invalid user name or password",
            ));
        }
        let token = new_token();
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        tokens.retain(|_, e| now.duration_since(e.last_used) < TOKEN_IDLE);
        tokens.insert(
            token.clone(),
            Entry {
                user: user.to_string(),
                session: SqlSession {
                    database: self.default_database.clone(),
                    role: self.roles.get(user).copied().unwrap_or_default(),
                },
                last_used: now,
            },
        );
        Ok(Principal {
            user: user.to_string(),
            token,
        })
    }

    /// The principal of a request: a valid `Bearer` token, or `Basic` credentials (which open a
    /// session). The second value is a freshly minted token to return in the response header.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<(Principal, bool), Status> {
        let Some(value) = metadata.get("authorization") else {
            return Err(super::status::status(
                ErrorKind::Unauthenticated,
                "no credentials: authenticate with a Basic handshake, then send 'authorization: Bearer <token>'",
            ));
        };
        let value = value.to_str().map_err(|_| {
            super::status::status(ErrorKind::Unauthenticated, "malformed authorization header")
        })?;
        if let Some(token) = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
        {
            let token = token.trim();
            let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            match tokens.get_mut(token) {
                Some(e) if e.last_used.elapsed() < TOKEN_IDLE => {
                    e.last_used = Instant::now();
                    Ok((
                        Principal {
                            user: e.user.clone(),
                            token: token.to_string(),
                        },
                        false,
                    ))
                }
                _ => Err(super::status::status(
                    ErrorKind::Unauthenticated,
                    "invalid or expired token",
                )),
            }
        } else {
            self.login_basic(value).map(|p| (p, true))
        }
    }

    /// The session of a token.
    pub fn session(&self, principal: &Principal) -> SqlSession {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        tokens
            .get(&principal.token)
            .map(|e| e.session.clone())
            .unwrap_or_default()
    }

    /// Changes the current database of a token's session.
    pub fn set_database(&self, principal: &Principal, database: String) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = tokens.get_mut(&principal.token) {
            e.session.database = database;
        }
    }

    /// Ends a session (its token stops working).
    pub fn close(&self, principal: &Principal) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        tokens.remove(&principal.token);
    }
}

fn new_token() -> String {
    // Two v4 UUIDs: 244 random bits from the OS generator.
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_padded_and_unpadded() {
        let users = HashMap::from([(
            "alice".to_string(),
            Credential::Hash(super::super::password::hash_password("s3cret").unwrap()),
        )]);
        let a = Authenticator::new(users, "default".into());
        // "alice:s3cret" is 12 bytes: no padding either way; "alice:s3cre" needs one '='.
        let padded = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        assert!(a.login_basic(&format!("Basic {padded}")).is_ok());
        let users = HashMap::from([("bob".to_string(), Credential::Plain("pw1".into()))]);
        let b = Authenticator::new(users, "default".into());
        let padded = base64::engine::general_purpose::STANDARD.encode("bob:pw1");
        assert!(padded.ends_with('='));
        assert!(b.login_basic(&format!("Basic {padded}")).is_ok());
        assert!(b
            .login_basic(&format!("Basic {}", padded.trim_end_matches('=')))
            .is_ok());
        let wrong = base64::engine::general_purpose::STANDARD.encode("bob:pw2");
        assert_eq!(
            b.login_basic(&format!("Basic {wrong}")).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        let p = b.login("bob", "pw1").unwrap();
        let mut md = MetadataMap::new();
        md.insert(
            "authorization",
            format!("Bearer {}", p.token).parse().unwrap(),
        );
        assert_eq!(b.authenticate(&md).unwrap().0.user, "bob");
        b.close(&p);
        assert!(b.authenticate(&md).is_err());
    }
}
