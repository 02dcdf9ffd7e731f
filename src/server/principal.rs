//! Who a call belongs to: the [`Principal`] `{tenant, subject, issuer, role}` that the
//! authenticator (`super::auth`) resolves from a call's credentials and every door (Flight,
//! REST) acts for. Plain data over the tenant it reaches; it knows nothing of how it was
//! resolved, so the audit log, the per-call context and the doors depend on it without depending
//! on authentication.

use std::sync::Arc;

use super::tenant::Tenant;
use crate::sql::Role;

/// Identifies a token's session: the first 16 bytes of SHA-256 of the token.
pub type SessionKey = [u8; 16];

/// The caller of one request, resolved before the request touches anything.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The tenant whose catalog this principal sees (and nothing else).
    pub tenant: Arc<Tenant>,
    /// The config user's name, or an identity provider's `sub`.
    pub subject: String,
    /// `tidelake` for minted tokens, else the identity provider's issuer.
    pub issuer: Arc<str>,
    /// The highest role granted.
    pub role: Role,
    /// The session of the token this principal came with.
    pub session: SessionKey,
    /// When the token expires (unix seconds).
    pub expires_at: u64,
}

impl Principal {
    /// Whose share of the work slots this call takes (one subject of one issuer in one tenant).
    pub fn admission_key(&self) -> String {
        format!("{}\0{}\0{}", self.tenant.name, self.issuer, self.subject)
    }
}
