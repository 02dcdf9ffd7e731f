//! Sealed tickets and prepared-statement handles: opaque bytes a client carries between calls,
//! signed with a subkey of the deployment's key (HMAC-SHA256), bound to the principal they were
//! issued to and valid until their expiry. Any server sharing the key opens them, so a load
//! balancer may send DoGet to another server than GetFlightInfo; nobody else can forge, alter or
//! redeem them.
//!
//! ```text
//!  sealed = "TLS1" | tag[32] | body
//!  body   = kind u8 | exp u64 BE | u16 len + tenant | u16 len + issuer | u16 len + subject | payload
//!  tag    = HMAC-SHA256(ticket_key, "TLS1" | body)
//! ```
//!
//! The tag is checked (in constant time) before any byte of the body is parsed.

use hmac::{KeyInit, Mac};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

const MAGIC: &[u8; 4] = b"TLS1";
const TAG_LEN: usize = 32;

/// What a sealed value is; one kind is never accepted as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A DoGet ticket.
    Ticket = 1,
    /// A prepared-statement handle.
    Handle = 2,
}

/// Whom a sealed value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    pub tenant: &'a str,
    pub issuer: &'a str,
    pub subject: &'a str,
}

/// Why a sealed value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not made with this deployment's key, altered, truncated, or of the other kind.
    NotOurs,
    Expired,
    /// Valid, but issued to another principal.
    OtherOwner,
}

fn mac(key: &[u8; 32]) -> HmacSha256 {
    <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length")
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&bytes[..usize::from(len)]);
}

/// `payload` sealed for `owner` until `exp` (unix seconds).
pub fn seal(key: &[u8; 32], kind: Kind, owner: Owner<'_>, exp: u64, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + payload.len());
    body.push(kind as u8);
    body.extend_from_slice(&exp.to_be_bytes());
    put_str(&mut body, owner.tenant);
    put_str(&mut body, owner.issuer);
    put_str(&mut body, owner.subject);
    body.extend_from_slice(payload);
    let mut m = mac(key);
    m.update(MAGIC);
    m.update(&body);
    let tag = m.finalize().into_bytes();
    let mut out = Vec::with_capacity(MAGIC.len() + TAG_LEN + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&tag);
    out.extend_from_slice(&body);
    out
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn str(&mut self) -> Option<&'a [u8]> {
        let len = self.take(2)?;
        self.take(usize::from(u16::from_be_bytes([len[0], len[1]])))
    }
}

/// The payload of a sealed value of `kind`, if it is genuine, unexpired at `now` and `owner`'s.
pub fn open<'a>(
    key: &[u8; 32],
    kind: Kind,
    owner: Owner<'_>,
    now: u64,
    sealed: &'a [u8],
) -> Result<&'a [u8], Refused> {
    if sealed.len() < MAGIC.len() + TAG_LEN || &sealed[..MAGIC.len()] != MAGIC {
        return Err(Refused::NotOurs);
    }
    let (tag, body) = sealed[MAGIC.len()..].split_at(TAG_LEN);
    let mut m = mac(key);
    m.update(MAGIC);
    m.update(body);
    m.verify_slice(tag).map_err(|_| Refused::NotOurs)?;
    // Genuine from here on: the body is what this deployment wrote.
    let mut r = Reader(body);
    let parsed = (|| {
        let k = r.take(1)?[0];
        let exp = u64::from_be_bytes(r.take(8)?.try_into().ok()?);
        Some((k, exp, r.str()?, r.str()?, r.str()?))
    })();
    let Some((k, exp, tenant, issuer, subject)) = parsed else {
        return Err(Refused::NotOurs);
    };
    if k != kind as u8 {
        return Err(Refused::NotOurs);
    }
    if exp < now {
        return Err(Refused::Expired);
    }
    if (tenant, issuer, subject)
        != (
            owner.tenant.as_bytes(),
            owner.issuer.as_bytes(),
            owner.subject.as_bytes(),
        )
    {
        return Err(Refused::OtherOwner);
    }
    Ok(r.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALICE: Owner<'static> = Owner {
        tenant: "acme",
        issuer: "tidelake",
        subject: "alice",
    };

    #[test]
    fn a_sealed_value_opens_for_its_owner_only() {
        let key = [1u8; 32];
        let s = seal(&key, Kind::Ticket, ALICE, 100, b"SELECT 1");
        assert_eq!(
            open(&key, Kind::Ticket, ALICE, 100, &s),
            Ok(&b"SELECT 1"[..])
        );
        assert_eq!(
            open(&key, Kind::Ticket, ALICE, 101, &s),
            Err(Refused::Expired)
        );
        assert_eq!(
            open(&key, Kind::Handle, ALICE, 0, &s),
            Err(Refused::NotOurs)
        );
        assert_eq!(
            open(&[2u8; 32], Kind::Ticket, ALICE, 0, &s),
            Err(Refused::NotOurs)
        );
        let bob = Owner {
            subject: "bob",
            ..ALICE
        };
        assert_eq!(
            open(&key, Kind::Ticket, bob, 0, &s),
            Err(Refused::OtherOwner)
        );
        let beta = Owner {
            tenant: "beta",
            ..ALICE
        };
        assert_eq!(
            open(&key, Kind::Ticket, beta, 0, &s),
            Err(Refused::OtherOwner)
        );
        // Field boundaries are length-prefixed: "ac"+"me…" is not "acme"+"…".
        let shifted = Owner {
            tenant: "ac",
            issuer: "metidelake",
            subject: "alice",
        };
        assert_eq!(
            open(&key, Kind::Ticket, shifted, 0, &s),
            Err(Refused::OtherOwner)
        );
        for junk in [&b""[..], b"TLS1", b"{\"sql\":\"SELECT 1\"}"] {
            assert_eq!(
                open(&key, Kind::Ticket, ALICE, 0, junk),
                Err(Refused::NotOurs)
            );
        }
    }

    proptest! {
        #[test]
        fn any_changed_byte_is_refused(
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let key = [7u8; 32];
            let mut s = seal(&key, Kind::Handle, ALICE, u64::MAX, &payload);
            let i = at.index(s.len());
            s[i] ^= flip;
            prop_assert_eq!(open(&key, Kind::Handle, ALICE, 0, &s), Err(Refused::NotOurs));
            // Truncation too.
            let whole = seal(&key, Kind::Handle, ALICE, u64::MAX, &payload);
            prop_assert_eq!(open(&key, Kind::Handle, ALICE, 0, &whole[..i.min(whole.len() - 1)]), Err(Refused::NotOurs));
        }
    }
}
