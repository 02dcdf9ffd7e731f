//! The tokens tidelake mints: HS256 JWTs (`iss` = `aud` = `tidelake`, `sub`, `tenant`, `roles`,
//! `iat`, `exp`, `jti`) signed with a subkey of the deployment's signing key, so that every server
//! given the same key accepts every other's tokens and keeps nothing per token. The signing key
//! and its subkeys (token, ticket, key id) live here too.
//!
//! Verification refuses with a fixed vocabulary of reasons ([`Refusal`]): which check failed,
//! never the token or a claim value taken from it (the one value named is an algorithm the token
//! asks for that no issuer allows, and only when it looks like an algorithm's name).
//!
//! A minted token is valid up to its `exp`, to the second, and not after: there is no leeway
//! (the servers of one deployment share the key and their clocks; a skew only shortens a
//! token's life on the server whose clock is ahead). Identity providers' tokens have their
//! issuer's `leeway_seconds` (`super::issuer`).

use hmac::{KeyInit, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::sql::Role;

/// The issuer (and audience) of minted tokens.
pub const MINTED_ISSUER: &str = "tidelake";

/// Longest bearer token accepted (identity providers' tokens are a few KiB at most).
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// Clock skew allowed on minted tokens' `exp`: none, a minted token ends at its `exp`.
const MINTED_LEEWAY_SECONDS: u64 = 0;

/// The algorithm of minted tokens, as [`check_header`] names it.
pub const MINTED_ALGORITHM: &str = "HS256";

/// Why a bearer token was refused. The text is what the client and the audit log see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub std::borrow::Cow<'static, str>);

impl Refusal {
    /// A refusal for one of the fixed reasons.
    pub const fn new(reason: &'static str) -> Self {
        Self(std::borrow::Cow::Borrowed(reason))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid bearer token: {}", self.0)
    }
}

/// The deployment's signing key and what is derived from it.
#[derive(Clone)]
pub struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// Names the key in minted tokens' `kid`, so a token of another deployment is told apart
    /// from a forged one.
    kid: String,
    ticket: [u8; 32],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Key material is never printed.
        f.debug_struct("Keys").field("kid", &self.kid).finish()
    }
}

/// `HMAC-SHA256(master, label)`: independent subkeys of one secret.
pub fn derive(master: &[u8], label: &[u8]) -> [u8; 32] {
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(master)
        .expect("HMAC takes keys of any length");
    mac.update(label);
    mac.finalize().into_bytes().into()
}

impl Keys {
    /// Keys derived from `master` (at least 32 bytes).
    pub fn from_master(master: &[u8]) -> Result<Self> {
        if master.len() < 32 {
            return invalid!(
                "the signing key has {} bytes; it needs at least 32 random bytes",
                master.len()
            );
        }
        let token = derive(master, b"tidelake token v1");
        let kid = hex::encode(&derive(master, b"tidelake key id v1")[..8]);
        let internal = |e: jsonwebtoken::errors::Error| {
            crate::error::InternalSnafu {
                message: format!("signing key: {e}"),
            }
            .build()
        };
        Ok(Self {
            encoding: EncodingKey::from_secret(&token).map_err(internal)?,
            decoding: DecodingKey::from_secret(&token).map_err(internal)?,
            kid,
            ticket: derive(master, b"tidelake ticket v1"),
        })
    }

    /// Fresh random keys (a single server without a configured `signing_key_file`).
    pub fn generate() -> Result<Self> {
        let mut master = [0u8; 32];
        getrandom::fill(&mut master).map_err(|e| {
            crate::error::InternalSnafu {
                message: format!("generating a signing key: {e}"),
            }
            .build()
        })?;
        Self::from_master(&master)
    }

    /// The contents of a `signing_key_file`: 64 or more hex digits (surrounding whitespace
    /// ignored), else the raw bytes; at least 32 bytes either way.
    pub fn from_file_contents(path: &str, bytes: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(bytes).map(str::trim).unwrap_or("");
        let master = match hex::decode(text) {
            Ok(decoded) if text.len() >= 64 => decoded,
            _ => bytes.to_vec(),
        };
        Self::from_master(&master).map_err(|e| {
            crate::error::InvalidArgumentSnafu {
                message: format!("signing_key_file {path}: {e}"),
            }
            .build()
        })
    }

    /// The key of sealed tickets and prepared-statement handles.
    pub fn ticket_key(&self) -> &[u8; 32] {
        &self.ticket
    }
}

/// The claims of a minted token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    pub tenant: String,
    pub roles: Vec<Role>,
    pub iat: u64,
    pub exp: u64,
    pub jti: String,
}

impl Claims {
    /// The highest role granted.
    pub fn role(&self) -> Option<Role> {
        self.roles.iter().copied().max()
    }
}

/// A token for `subject` of `tenant` with `role`, valid for `ttl_seconds` from `now` (unix
/// seconds).
pub fn mint(
    keys: &Keys,
    subject: &str,
    tenant: &str,
    role: Role,
    now: u64,
    ttl_seconds: u64,
) -> Result<(String, Claims)> {
    let claims = Claims {
        iss: MINTED_ISSUER.into(),
        aud: MINTED_ISSUER.into(),
        sub: subject.into(),
        tenant: tenant.into(),
        roles: vec![role],
        iat: now,
        exp: now.saturating_add(ttl_seconds),
        jti: uuid::Uuid::new_v4().simple().to_string(),
    };
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(keys.kid.clone());
    let token = jsonwebtoken::encode(&header, &claims, &keys.encoding).map_err(|e| {
        crate::error::InternalSnafu {
            message: format!("minting a token: {e}"),
        }
        .build()
    })?;
    Ok((token, claims))
}

/// The claims of a minted token, checked against the system clock (jsonwebtoken reads it).
pub fn verify(keys: &Keys, token: &str) -> std::result::Result<Claims, Refusal> {
    let header = check_header(token, MINTED_ALGORITHM)?;
    if header.alg != Algorithm::HS256 {
        return Err(Refusal::new("algorithm not allowed for this issuer"));
    }
    if header.kid.as_deref() != Some(keys.kid.as_str()) {
        return Err(Refusal::new("signed by another deployment's key"));
    }
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = MINTED_LEEWAY_SECONDS;
    validation.validate_nbf = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.set_issuer(&[MINTED_ISSUER]);
    validation.set_audience(&[MINTED_ISSUER]);
    jsonwebtoken::decode::<Claims>(token, &keys.decoding, &validation)
        .map(|d| d.claims)
        .map_err(|e| refusal(&e))
}

/// The header of a bearer token, refusing what no issuer may use: an overlong token, a
/// malformed one, an algorithm no issuer may use (`alg: none`, or one jsonwebtoken does not
/// know; `accepted` lists the algorithms that are, for the message), and headers that point at
/// or embed keys (keys are never fetched, nor taken from the token itself).
pub fn check_header(token: &str, accepted: &str) -> std::result::Result<Header, Refusal> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Refusal::new("too long"));
    }
    let header =
        jsonwebtoken::decode_header(token).map_err(|_| unreadable_header(token, accepted))?;
    if header.jku.is_some() || header.x5u.is_some() {
        return Err(Refusal::new(
            "jku/x5u headers are refused (keys are never fetched)",
        ));
    }
    if header.jwk.is_some() || header.x5c.is_some() {
        return Err(Refusal::new("embedded keys are refused"));
    }
    Ok(header)
}

/// Why a header jsonwebtoken cannot read is refused: an algorithm it does not know (`none`
/// among them) is refused as such, naming it when it looks like an algorithm's name (at most 16
/// letters, digits, `-` and `_`: never arbitrary text from the token); else the token is
/// malformed.
fn unreadable_header(token: &str, accepted: &str) -> Refusal {
    use base64::Engine;
    let alg = token
        .split('.')
        .next()
        .and_then(|h| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .ok()
        })
        .and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok())
        .and_then(|h| h.get("alg").and_then(|a| a.as_str()).map(str::to_string));
    match alg {
        Some(a) if a.parse::<Algorithm>().is_err() => {
            let named = a.len() <= 16
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            let shown = if named {
                format!(" '{a}'")
            } else {
                String::new()
            };
            Refusal(format!("token algorithm{shown} is not allowed (expected {accepted})").into())
        }
        _ => Refusal::new("malformed token"),
    }
}

/// The fixed reason for a jsonwebtoken error.
pub fn refusal(e: &jsonwebtoken::errors::Error) -> Refusal {
    use jsonwebtoken::errors::ErrorKind as K;
    Refusal::new(match e.kind() {
        K::ExpiredSignature => "token expired",
        K::ImmatureSignature => "token not yet valid (nbf)",
        K::InvalidAudience => "wrong audience",
        K::InvalidIssuer => "wrong issuer",
        K::MissingRequiredClaim(c) => match c.as_str() {
            "exp" => "token lacks the 'exp' claim",
            "iss" => "token lacks the 'iss' claim",
            "aud" => "token lacks the 'aud' claim",
            "sub" => "token lacks the 'sub' claim",
            _ => "token lacks a required claim",
        },
        K::InvalidSignature => "signature does not verify",
        K::InvalidAlgorithm => "algorithm not allowed",
        K::InvalidClaimFormat(_) | K::Json(_) => "a claim is malformed",
        _ => "malformed token",
    })
}

/// Now, in unix seconds.
pub fn unix_now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(byte: u8) -> Keys {
        Keys::from_master(&[byte; 32]).unwrap()
    }

    #[test]
    fn a_minted_token_verifies_with_the_same_key_only() {
        let now = unix_now();
        let (token, claims) = mint(&keys(1), "alice", "acme", Role::Writer, now, 60).unwrap();
        let got = verify(&keys(1), &token).unwrap();
        assert_eq!(got, claims);
        assert_eq!(got.role(), Some(Role::Writer));
        assert_eq!((got.sub.as_str(), got.tenant.as_str()), ("alice", "acme"));
        // Another deployment's key: told apart by kid.
        assert_eq!(
            verify(&keys(2), &token).unwrap_err().0,
            "signed by another deployment's key"
        );
        // Two tokens never share a jti.
        let (_, again) = mint(&keys(1), "alice", "acme", Role::Writer, now, 60).unwrap();
        assert_ne!(again.jti, claims.jti);
    }

    #[test]
    fn tampering_and_expiry_are_refused() {
        let k = keys(3);
        let now = unix_now();
        let (token, _) = mint(&k, "bob", "tidelake", Role::Reader, now, 60).unwrap();
        // One character of the signature changed.
        let mut bytes = token.clone().into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(bytes).unwrap();
        assert_eq!(
            verify(&k, &forged).unwrap_err().0,
            "signature does not verify"
        );
        // The payload swapped for another token's (role raised) under the old signature.
        let (admin, _) = mint(&k, "bob", "tidelake", Role::Admin, now, 60).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let admin_parts: Vec<&str> = admin.split('.').collect();
        let spliced = format!("{}.{}.{}", parts[0], admin_parts[1], parts[2]);
        assert!(verify(&k, &spliced).is_err());
        // Expired.
        let (old, _) = mint(&k, "bob", "tidelake", Role::Reader, now - 100, 10).unwrap();
        assert_eq!(verify(&k, &old).unwrap_err().0, "token expired");
        for junk in ["", "abc", "a.b.c", &"x".repeat(MAX_TOKEN_LEN + 1)] {
            assert!(verify(&k, junk).is_err(), "{junk:.20}");
        }
        // The refusal never carries the token.
        let text = verify(&k, &forged).unwrap_err().to_string();
        assert!(!text.contains(parts[2]), "{text}");
    }

    /// A minted token is taken up to its `exp` and refused from the second after: no leeway.
    #[test]
    fn a_minted_token_ends_at_its_exp() {
        let k = keys(4);
        let now = unix_now();
        // exp = now + 2: valid (a slow test machine still has a second to spare).
        let (live, claims) = mint(&k, "bob", "tidelake", Role::Reader, now - 8, 10).unwrap();
        assert_eq!(claims.exp, now + 2);
        assert!(verify(&k, &live).is_ok());
        // exp one, two and five seconds ago: refused (the old leeway took all three).
        for ago in [1, 2, 5] {
            let (late, claims) =
                mint(&k, "bob", "tidelake", Role::Reader, now - 10 - ago, 10).unwrap();
            assert_eq!(claims.exp, now - ago);
            assert_eq!(
                verify(&k, &late).unwrap_err().0,
                "token expired",
                "{ago} s late"
            );
        }
    }

    /// `alg: none` (and any algorithm jsonwebtoken does not know) is refused naming the check
    /// and the algorithms accepted; a name that is not an algorithm's is not echoed.
    #[test]
    fn an_unknown_algorithm_is_refused_by_name() {
        use base64::Engine;
        let b64 = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let claims =
            b64(serde_json::json!({"iss": "tidelake", "sub": "bob", "exp": unix_now() + 60}));
        let with_alg = |alg: &str| {
            format!(
                "{}.{claims}.",
                b64(serde_json::json!({"alg": alg, "typ": "JWT"}))
            )
        };
        let e = check_header(&with_alg("none"), "HS256/RS256").unwrap_err();
        assert_eq!(
            e.0,
            "token algorithm 'none' is not allowed (expected HS256/RS256)"
        );
        assert_eq!(
            e.to_string(),
            "invalid bearer token: token algorithm 'none' is not allowed (expected HS256/RS256)"
        );
        let e = verify(&keys(5), &with_alg("ES512")).unwrap_err();
        assert_eq!(
            e.0,
            "token algorithm 'ES512' is not allowed (expected HS256)"
        );
        let e = check_header(&with_alg("none\n<script>"), "HS256").unwrap_err();
        assert_eq!(e.0, "token algorithm is not allowed (expected HS256)");
        // A header without an algorithm, or not JSON at all: malformed.
        let no_alg = format!("{}.{claims}.", b64(serde_json::json!({"typ": "JWT"})));
        assert_eq!(
            check_header(&no_alg, "HS256").unwrap_err().0,
            "malformed token"
        );
        assert_eq!(
            check_header("a.b.c", "HS256").unwrap_err().0,
            "malformed token"
        );
    }

    #[test]
    fn signing_key_files_are_hex_or_raw() {
        let hex = "ab".repeat(32);
        let a = Keys::from_file_contents("k", format!("{hex}\n").as_bytes()).unwrap();
        let b = Keys::from_master(&[0xab; 32]).unwrap();
        assert_eq!(a.kid, b.kid);
        assert_eq!(a.ticket_key(), b.ticket_key());
        let raw = Keys::from_file_contents("k", &[7u8; 40]).unwrap();
        assert_eq!(raw.kid, Keys::from_master(&[7u8; 40]).unwrap().kid);
        let e = Keys::from_file_contents("/etc/k", b"short\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("signing_key_file /etc/k") && e.contains("32"),
            "{e}"
        );
        // Subkeys differ from each other and from the master.
        assert_ne!(derive(&[1; 32], b"a"), derive(&[1; 32], b"b"));
    }
}
