//! Users' credentials: argon2 password hashes (PHC strings, `$argon2id$v=19$...`) from the
//! config, and the one plaintext password of the embedded default user (`TIDELAKE_USER` /
//! `TIDELAKE_PASSWORD`, or a generated one). `tidelake hash-password` prints a hash with
//! argon2's default parameters (argon2id v19, 19 MiB, 2 passes, 1 lane).

use std::sync::OnceLock;

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;

use crate::error::{invalid, Result};

/// How a user proves who they are.
#[derive(Clone)]
pub enum Credential {
    /// An argon2 PHC string, checked to parse when the config is loaded.
    Hash(String),
    /// A plaintext password (the embedded default user only; never from the config).
    Plain(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Neither a hash nor a password is ever printed.
        f.write_str(match self {
            Credential::Hash(_) => "Credential::Hash(..)",
            Credential::Plain(_) => "Credential::Plain(..)",
        })
    }
}

impl Credential {
    /// The credential of a `password_hash` from the config; `user` names it in the error.
    pub fn hash(user: &str, phc: &str) -> Result<Self> {
        match PasswordHash::new(phc) {
            Ok(h) if h.algorithm.as_str().starts_with("argon2") => Ok(Credential::Hash(phc.into())),
            Ok(h) => invalid!(
                "config: user '{user}': password_hash uses {}, not argon2; make one with `tidelake hash-password`",
                h.algorithm.as_str()
            ),
            Err(e) => invalid!(
                "config: user '{user}': password_hash is not a PHC string ({e}); make one with `tidelake hash-password`"
            ),
        }
    }

    /// Whether `password` is this credential's. Hashes cost what their parameters say (tens of
    /// milliseconds with the defaults); plaintext is compared in full whatever the first
    /// difference.
    pub fn verify(&self, password: &str) -> bool {
        match self {
            Credential::Hash(phc) => match PasswordHash::new(phc) {
                Ok(h) => Argon2::default()
                    .verify_password(password.as_bytes(), &h)
                    .is_ok(),
                Err(_) => false,
            },
            Credential::Plain(expected) => {
                let (a, b) = (expected.as_bytes(), password.as_bytes());
                let mut diff = a.len() ^ b.len();
                for i in 0..a.len().max(b.len()) {
                    diff |= usize::from(
                        a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(1),
                    );
                }
                diff == 0
            }
        }
    }
}

/// A fresh argon2id hash of `password` with a random salt (what `tidelake hash-password` prints).
pub fn hash_password(password: &str) -> Result<String> {
    match Argon2::default().hash_password(password.as_bytes()) {
        Ok(h) => Ok(h.to_string()),
        Err(e) => invalid!("hashing the password: {e}"),
    }
}

/// Checks a password for a user who does not exist, at the cost of a real check, so that the
/// time of a failed login does not tell whether the user exists.
pub fn verify_unknown(password: &str) -> bool {
    static DUMMY: OnceLock<Option<Credential>> = OnceLock::new();
    if let Some(c) = DUMMY.get_or_init(|| {
        hash_password("tidelake: no such user")
            .ok()
            .map(Credential::Hash)
    }) {
        c.verify(password);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let phc = hash_password("s3cret").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$"), "{phc}");
        let c = Credential::hash("alice", &phc).unwrap();
        assert!(c.verify("s3cret"));
        assert!(!c.verify("s3cret "));
        assert!(!c.verify(""));
        // A second hash of the same password has another salt.
        assert_ne!(hash_password("s3cret").unwrap(), phc);
        assert!(!verify_unknown("s3cret"));
    }

    #[test]
    fn a_config_hash_must_be_an_argon2_phc_string() {
        let e = Credential::hash("alice", "s3cret").unwrap_err().to_string();
        assert!(
            e.contains("user 'alice': password_hash is not a PHC string"),
            "{e}"
        );
        assert!(e.contains("tidelake hash-password"), "{e}");
        let e = Credential::hash(
            "bob",
            "$pbkdf2-sha256$i=1000$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not argon2"), "{e}");
    }

    #[test]
    fn plaintext_compares_in_full() {
        let c = Credential::Plain("pw1".into());
        assert!(c.verify("pw1"));
        assert!(!c.verify("pw"));
        assert!(!c.verify("pw12"));
        assert!(!format!("{c:?}").contains("pw1"));
    }
}
