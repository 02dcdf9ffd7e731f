//! A tenant's streaming writes open on this server, one per (table, commit user): a second stream
//! of one commit user into one table is refused while the first lives (the first may hold rows it
//! has not acknowledged yet; fencing it would lose nothing durable but would surprise it). Each
//! tenant owns one registry ([`super::Tenant::writers`]); the streaming-write door
//! (`crate::server::streaming`) takes a place for each stream it opens.
//!
//! Fencing across servers is the committer's ([`crate::table::TableCommit::commit_fenced`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The streams open on this server for one tenant, by table and commit user.
#[derive(Debug, Default)]
pub struct Streams {
    open: Mutex<HashMap<(String, String), Instant>>,
}

/// Holds a stream's place in [`Streams`]; dropping it frees the place.
#[derive(Debug)]
pub struct StreamGuard {
    streams: Arc<Streams>,
    key: (String, String),
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.streams
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}

impl Streams {
    /// Takes the place of (`table`, `commit_user`), or says since when another stream holds it.
    pub fn open(self: &Arc<Self>, table: &str, commit_user: &str) -> Result<StreamGuard, Duration> {
        let key = (table.to_string(), commit_user.to_string());
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(since) = open.get(&key) {
            return Err(since.elapsed());
        }
        open.insert(key.clone(), Instant::now());
        Ok(StreamGuard {
            streams: Arc::clone(self),
            key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_per_table_and_commit_user() {
        let streams = Arc::new(Streams::default());
        let a = streams.open("db.t", "u").unwrap();
        assert!(streams.open("db.t", "u").is_err());
        let _b = streams.open("db.t", "v").unwrap();
        let _c = streams.open("db.t2", "u").unwrap();
        drop(a);
        assert!(streams.open("db.t", "u").is_ok());
    }
}
