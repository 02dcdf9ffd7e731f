//! Identity providers (`[[auth.issuers]]`): bearer JWTs signed by someone else's keys, from a
//! JWKS file (RS/PS/ES/EdDSA keys chosen by `kid`, re-read when the file changes) or an HS256
//! secret from an environment variable. Each issuer pins its algorithms; `iss`, `aud`, `exp` and
//! `sub` are required and `nbf` is honoured, with the issuer's leeway. The tenant and roles come
//! from claims the issuer names.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde_json::{Map, Value};

use super::token::Refusal;
use crate::error::{invalid, Result};
use crate::sql::Role;

/// How often a JWKS file is looked at for changes.
const JWKS_RECHECK: Duration = Duration::from_secs(1);

/// Algorithms an issuer may pin.
const ALLOWED: &[&str] = &[
    "HS256", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// One `[[auth.issuers]]` entry, as configured.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<String>,
    pub jwks_file: Option<String>,
    pub hs256_secret_env: Option<String>,
    pub tenant_claim: Option<String>,
    pub roles_claim: Option<String>,
    pub leeway_seconds: Option<u64>,
}

/// A key of a JWKS file.
#[derive(Clone)]
struct Key {
    key: DecodingKey,
    /// The JWK's `alg`, when it names one.
    alg: Option<Algorithm>,
}

/// The keys of a JWKS file by `kid`, and what the file looked like when read.
#[derive(Clone, Default)]
struct KeySet {
    keys: HashMap<String, Key>,
    stamp: Option<(SystemTime, u64)>,
}

/// A JWKS file, re-read by a watcher thread when its modification time or length changes (looked
/// at every [`JWKS_RECHECK`]); an unreadable or invalid new version keeps the keys of the last good
/// one, and says so in the log. Requests only read the current set: no token makes the server
/// read a file.
struct JwksFile {
    current: Arc<Mutex<Arc<KeySet>>>,
    /// Dropped with the issuer, which ends the watcher.
    _stop: std::sync::mpsc::Sender<()>,
}

enum Keys {
    Jwks(JwksFile),
    Hs256(DecodingKey),
}

/// A configured identity provider.
pub struct Issuer {
    pub issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    keys: Keys,
    tenant_claim: String,
    roles_claim: String,
    leeway: u64,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

/// What a verified identity-provider token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub subject: String,
    /// The tenant claim, when present (a string).
    pub tenant: Option<String>,
    /// The highest tidelake role the roles claim grants.
    pub role: Option<Role>,
    pub expires_at: u64,
}

fn parse_jwks(path: &str, bytes: &[u8]) -> Result<HashMap<String, Key>> {
    let set: JwkSet = match serde_json::from_slice(bytes) {
        Ok(s) => s,
        Err(e) => return invalid!("jwks_file {path}: not a JWKS document ({e})"),
    };
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else {
            return invalid!("jwks_file {path}: a key has no 'kid'");
        };
        check_jwk(path, &kid, jwk)?;
        let key = match DecodingKey::from_jwk(jwk) {
            Ok(k) => k,
            Err(e) => return invalid!("jwks_file {path}: key '{kid}': {e}"),
        };
        let alg = match &jwk.common.key_algorithm {
            None => None,
            Some(a) => {
                let name = serde_json::to_value(a)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                match name.parse::<Algorithm>() {
                    Ok(a) => Some(a),
                    Err(_) => return invalid!("jwks_file {path}: key '{kid}' has alg {name}"),
                }
            }
        };
        if keys.insert(kid.clone(), Key { key, alg }).is_some() {
            return invalid!("jwks_file {path}: kid '{kid}' appears twice");
        }
    }
    Ok(keys)
}

fn check_jwk(path: &str, kid: &str, jwk: &Jwk) -> Result<()> {
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return invalid!("jwks_file {path}: key '{kid}' is not for signatures (use)");
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(p) => {
            use base64::Engine;
            let n = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p.n.trim_end_matches('='))
                .unwrap_or_default();
            let bits = n.iter().skip_while(|b| **b == 0).count() * 8;
            if bits < 2048 {
                return invalid!(
                    "jwks_file {path}: RSA key '{kid}' has {bits} bits; 2048 at least"
                );
            }
            Ok(())
        }
        AlgorithmParameters::EllipticCurve(_) | AlgorithmParameters::OctetKeyPair(_) => Ok(()),
        AlgorithmParameters::OctetKey(_) => invalid!(
            "jwks_file {path}: key '{kid}' is symmetric; HS256 secrets belong in hs256_secret_env"
        ),
        _ => invalid!("jwks_file {path}: key '{kid}' has an unsupported type"),
    }
}

fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// One small file read, at start-up or on the watcher thread (never on a request's path).
#[allow(clippy::disallowed_methods)]
fn read_jwks(path: &std::path::Path) -> Result<HashMap<String, Key>> {
    let shown = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => parse_jwks(&shown, &bytes),
        Err(e) => invalid!("jwks_file {shown}: {e}"),
    }
}

impl JwksFile {
    fn open(path: &str) -> Result<Self> {
        let path = PathBuf::from(path);
        let keys = read_jwks(&path)?;
        let stamp = stamp(&path);
        let current = Arc::new(Mutex::new(Arc::new(KeySet { keys, stamp })));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let shared = Arc::clone(&current);
        std::thread::Builder::new()
            .name("tidelake-jwks".into())
            .spawn(move || {
                // Wakes every JWKS_RECHECK until the issuer is dropped.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(JWKS_RECHECK)
                {
                    reload(&path, &shared);
                }
            })
            .map_err(|e| {
                crate::error::InternalSnafu {
                    message: format!("starting the JWKS watcher: {e}"),
                }
                .build()
            })?;
        Ok(Self {
            current,
            _stop: stop,
        })
    }

    fn current(&self) -> Arc<KeySet> {
        Arc::clone(&self.current.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Re-reads `path` into `shared` if it changed since the last look.
fn reload(path: &std::path::Path, shared: &Mutex<Arc<KeySet>>) {
    let now = stamp(path);
    let last = shared.lock().unwrap_or_else(|e| e.into_inner()).stamp;
    if now == last {
        return;
    }
    let shown = path.display().to_string();
    let mut slot = shared.lock().unwrap_or_else(|e| e.into_inner());
    match read_jwks(path) {
        Ok(keys) => {
            tracing::info!(path = %shown, keys = keys.len(), "JWKS file reloaded");
            *slot = Arc::new(KeySet { keys, stamp: now });
        }
        Err(e) => {
            tracing::warn!(path = %shown, error = %e, "JWKS file changed but is not valid; keeping the previous keys");
            let mut kept = (**slot).clone();
            kept.stamp = now;
            *slot = Arc::new(kept);
        }
    }
}

impl Issuer {
    /// An issuer from its config; `read_env` looks up `hs256_secret_env`.
    pub fn new(c: &IssuerConfig, read_env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let name = &c.issuer;
        if name.is_empty() || name == super::token::MINTED_ISSUER {
            return invalid!("config: [[auth.issuers]] issuer '{name}' is reserved or empty");
        }
        if c.audience.is_empty() {
            return invalid!("config: issuer '{name}' needs an audience");
        }
        if c.algorithms.is_empty() {
            return invalid!("config: issuer '{name}' needs algorithms (e.g. [\"RS256\"])");
        }
        let mut algorithms = Vec::new();
        for a in &c.algorithms {
            match (ALLOWED.contains(&a.as_str()), a.parse::<Algorithm>()) {
                (true, Ok(alg)) => algorithms.push(alg),
                _ => {
                    return invalid!(
                        "config: issuer '{name}': algorithm '{a}' is not one of {}",
                        ALLOWED.join(", ")
                    )
                }
            }
        }
        let hmac = algorithms.contains(&Algorithm::HS256);
        let keys = match (&c.jwks_file, &c.hs256_secret_env) {
            (Some(file), None) if !hmac => Keys::Jwks(JwksFile::open(file)?),
            (None, Some(env)) if algorithms == [Algorithm::HS256] => {
                let secret = read_env(env).unwrap_or_default();
                if secret.len() < 32 {
                    return invalid!(
                        "config: issuer '{name}': the environment variable {env} must hold a secret of 32 bytes or more"
                    );
                }
                Keys::Hs256(DecodingKey::from_secret(secret.as_bytes()).map_err(|e| {
                    crate::error::InvalidArgumentSnafu {
                        message: format!("config: issuer '{name}': {e}"),
                    }
                    .build()
                })?)
            }
            (Some(_), Some(_)) | (None, None) => {
                return invalid!(
                    "config: issuer '{name}' needs exactly one of jwks_file and hs256_secret_env"
                )
            }
            _ => {
                return invalid!(
                    "config: issuer '{name}': HS256 goes with hs256_secret_env alone, the other algorithms with jwks_file"
                )
            }
        };
        Ok(Self {
            issuer: name.clone(),
            audience: c.audience.clone(),
            algorithms,
            keys,
            tenant_claim: c.tenant_claim.clone().unwrap_or_else(|| "tenant".into()),
            roles_claim: c.roles_claim.clone().unwrap_or_else(|| "roles".into()),
            leeway: c.leeway_seconds.unwrap_or(30),
        })
    }

    /// The algorithms this issuer's tokens may use.
    pub fn algorithms(&self) -> &[Algorithm] {
        &self.algorithms
    }

    /// The identity in `token` (whose `header` `super::token::check_header` has passed).
    pub fn verify(&self, token: &str, header: &Header) -> std::result::Result<Identity, Refusal> {
        if !self.algorithms.contains(&header.alg) {
            return Err(Refusal::new("algorithm not allowed for this issuer"));
        }
        let key = match &self.keys {
            Keys::Hs256(k) => k.clone(),
            Keys::Jwks(file) => {
                let kid = header
                    .kid
                    .as_deref()
                    .ok_or(Refusal::new("token has no kid"))?;
                let set = file.current();
                let key = set.keys.get(kid).ok_or(Refusal::new("unknown key id"))?;
                if key.alg.is_some_and(|a| a != header.alg)
                    || key.key.family() != header.alg.family()
                {
                    return Err(Refusal::new("key is for another algorithm"));
                }
                key.key.clone()
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| super::token::refusal(&e))?
            .claims;
        let subject = match claims.get("sub") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(Refusal::new("claim 'sub' is malformed")),
        };
        let tenant = match claims.get(&self.tenant_claim) {
            None => None,
            Some(Value::String(t)) => Some(t.clone()),
            Some(_) => return Err(Refusal::new("the tenant claim is not a string")),
        };
        let names: Vec<&str> = match claims.get(&self.roles_claim) {
            Some(Value::String(r)) => r.split([' ', ',']).collect(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let role = names
            .iter()
            .filter_map(|n| match *n {
                "reader" => Some(Role::Reader),
                "writer" => Some(Role::Writer),
                "admin" => Some(Role::Admin),
                _ => None,
            })
            .max();
        let expires_at = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok(Identity {
            subject,
            tenant,
            role,
            expires_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};

    const SECRET: &str = "an-hs256-secret-that-is-long-enough!!";

    fn hs_issuer() -> Issuer {
        let c = IssuerConfig {
            issuer: "https://idp.example.com".into(),
            audience: "tidelake".into(),
            algorithms: vec!["HS256".into()],
            hs256_secret_env: Some("IDP_SECRET".into()),
            ..Default::default()
        };
        Issuer::new(&c, |_| Some(SECRET.into())).unwrap()
    }

    fn token(claims: serde_json::Value) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
        )
        .unwrap()
    }

    fn check(t: &str) -> std::result::Result<Identity, Refusal> {
        let header = super::super::token::check_header(t, "HS256")?;
        hs_issuer().verify(t, &header)
    }

    #[test]
    fn claims_are_checked_and_mapped() {
        let now = super::super::token::unix_now();
        let good = serde_json::json!({"iss": "https://idp.example.com", "aud": "tidelake", "sub": "ann",
            "exp": now + 60, "tenant": "acme", "roles": ["reader", "writer", "other"]});
        let id = check(&token(good.clone())).unwrap();
        assert_eq!(id.subject, "ann");
        assert_eq!(id.tenant.as_deref(), Some("acme"));
        assert_eq!(id.role, Some(Role::Writer));
        let with = |k: &str, v: serde_json::Value| {
            let mut c = good.clone();
            c[k] = v;
            token(c)
        };
        let without = |k: &str| {
            let mut c = good.clone();
            c.as_object_mut().unwrap().remove(k);
            token(c)
        };
        assert_eq!(
            check(&with("aud", "other".into())).unwrap_err().0,
            "wrong audience"
        );
        assert_eq!(
            check(&with("iss", "https://evil".into())).unwrap_err().0,
            "wrong issuer"
        );
        assert_eq!(
            check(&without("aud")).unwrap_err().0,
            "token lacks the 'aud' claim"
        );
        assert_eq!(
            check(&without("exp")).unwrap_err().0,
            "token lacks the 'exp' claim"
        );
        assert_eq!(
            check(&with("exp", (now - 31).into())).unwrap_err().0,
            "token expired"
        );
        assert!(
            check(&with("exp", (now - 20).into())).is_ok(),
            "within the leeway"
        );
        assert_eq!(
            check(&with("nbf", (now + 120).into())).unwrap_err().0,
            "token not yet valid (nbf)"
        );
        assert_eq!(
            check(&with("roles", "admin".into())).unwrap().role,
            Some(Role::Admin)
        );
        assert_eq!(check(&without("roles")).unwrap().role, None);
        // Signed with another secret.
        let forged = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &good,
            &EncodingKey::from_secret(b"another secret of the same kind, long").unwrap(),
        )
        .unwrap();
        assert_eq!(check(&forged).unwrap_err().0, "signature does not verify");
    }

    #[test]
    fn configurations_that_cannot_be_safe_are_refused() {
        let base = IssuerConfig {
            issuer: "https://idp".into(),
            audience: "a".into(),
            algorithms: vec!["RS256".into()],
            ..Default::default()
        };
        let err = |c: IssuerConfig| {
            Issuer::new(&c, |_| Some(SECRET.into()))
                .unwrap_err()
                .to_string()
        };
        assert!(err(base.clone()).contains("exactly one of jwks_file and hs256_secret_env"));
        let mut c = base.clone();
        c.hs256_secret_env = Some("X".into());
        assert!(err(c).contains("HS256 goes with hs256_secret_env alone"));
        let mut c = base.clone();
        c.algorithms = vec!["none".into()];
        c.jwks_file = Some("/nonexistent".into());
        assert!(err(c).contains("algorithm 'none' is not one of"));
        let mut c = base.clone();
        c.issuer = "tidelake".into();
        assert!(err(c).contains("reserved"));
        let mut c = base;
        c.algorithms = vec!["HS256".into()];
        c.hs256_secret_env = Some("X".into());
        let e = Issuer::new(&c, |_| Some("short".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("32 bytes or more"), "{e}");
    }

    #[test]
    fn jwks_files_refuse_weak_and_symmetric_keys() {
        let oct = br#"{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}"#;
        let e = parse_jwks("j", oct).err().unwrap().to_string();
        assert!(e.contains("symmetric"), "{e}");
        let small = br#"{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}"#;
        let e = parse_jwks("j", small).err().unwrap().to_string();
        assert!(e.contains("2048 at least"), "{e}");
        let nokid = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        assert!(parse_jwks("j", nokid)
            .err()
            .unwrap()
            .to_string()
            .contains("no 'kid'"));
        let ed = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"e","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        assert_eq!(parse_jwks("j", ed).unwrap().len(), 1);
    }
}
