//! Tenants: each a namespace with its own warehouse (a valid Paimon warehouse Spark or Flink can
//! be pointed at), its own SQL engine (whose one catalog is named after the tenant), its own
//! limits (statements, subscriptions, streaming writes at once) and its own registries of what
//! runs on this server: long operations ([`operations`]) and streaming writes ([`streams`]). A
//! principal reaches exactly one tenant; nothing of another tenant is registered in its engine,
//! so no SQL name, ticket or listing can reach it.
//!
//! This module sits below every door: it imports nothing of the server but the status mapping
//! its limits refuse with; the doors (Flight, REST) reach a tenant through the caller's
//! [`Principal`](super::principal::Principal).
//!
//! With no `[[tenants]]` configured there is one implicit tenant, `tidelake`, whose warehouse is
//! the root and whose catalog is `tidelake` (everything works as before tenants).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::catalog::Catalog;
use crate::error::{invalid, of_kind, ErrorKind, Result};
use crate::sql::{SqlEngine, SqlLimits, CATALOG_NAME};

pub mod operations;
pub mod streams;

use operations::Operations;
use streams::Streams;

/// One configured tenant, resolved.
#[derive(Debug, Clone)]
pub struct TenantOptions {
    pub name: String,
    /// Where its warehouse is (default `<warehouse>/tenants/<name>`).
    pub warehouse: String,
    pub limits: SqlLimits,
    /// Statements running at once (more wait, up to as many again; beyond, ResourceExhausted).
    pub max_concurrent_statements: Option<usize>,
    /// Changelog subscriptions open at once.
    pub max_subscriptions: Option<usize>,
    /// Streaming writes open at once.
    pub max_streams: Option<usize>,
}

/// A tenant being served.
#[derive(Debug)]
pub struct Tenant {
    /// Also the name of its one catalog.
    pub name: String,
    pub engine: SqlEngine,
    /// Its long admin operations (list_operations and cancel see only these).
    pub operations: Arc<Operations>,
    statements: Option<Limit>,
    subscriptions: Option<Limit>,
    streams: Option<Limit>,
    /// Its streaming writes on this server, one per (table, commit user).
    pub writers: Arc<Streams>,
}

#[derive(Debug)]
struct Limit {
    max: usize,
    permits: Arc<Semaphore>,
    /// Callers waiting for a permit (at most `max`).
    waiting: std::sync::atomic::AtomicUsize,
}

impl Limit {
    fn new(max: usize) -> Self {
        Self {
            max,
            permits: Arc::new(Semaphore::new(max)),
            waiting: Default::default(),
        }
    }
}

/// A permit of `limit` at once (`None` without a limit), or ResourceExhausted with `refusal(max)`.
fn take_now(
    limit: &Option<Limit>,
    refusal: impl FnOnce(usize) -> String,
) -> Result<Option<OwnedSemaphorePermit>> {
    let Some(limit) = limit else {
        return Ok(None);
    };
    Arc::clone(&limit.permits)
        .try_acquire_owned()
        .map(Some)
        .map_err(|_| exhausted(refusal(limit.max)))
}

fn exhausted(message: String) -> crate::error::Error {
    of_kind(ErrorKind::ResourceExhausted, message)
}

impl Tenant {
    fn open(
        name: &str,
        warehouse: &str,
        limits: SqlLimits,
        storage: &crate::io::StorageOptions,
    ) -> Result<Self> {
        let engine = SqlEngine::named(Catalog::open_with(warehouse, storage)?, limits, name)?;
        Ok(Self {
            name: name.to_string(),
            engine,
            operations: Arc::default(),
            statements: None,
            subscriptions: None,
            streams: None,
            writers: Arc::default(),
        })
    }

    /// A slot for one statement: at once when one is free; else waiting (at most as many
    /// callers as the limit wait), else ResourceExhausted naming the limit. `None` when the
    /// tenant has no limit.
    pub async fn admit_statement(&self) -> Result<Option<OwnedSemaphorePermit>> {
        use std::sync::atomic::Ordering;
        let Some(limit) = &self.statements else {
            return Ok(None);
        };
        if let Ok(p) = Arc::clone(&limit.permits).try_acquire_owned() {
            return Ok(Some(p));
        }
        if limit.waiting.fetch_add(1, Ordering::SeqCst) >= limit.max {
            limit.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(exhausted(format!(
                "tenant '{}' is at max_concurrent_statements = {} ({} waiting); retry later",
                self.name, limit.max, limit.max
            )));
        }
        let permit = Arc::clone(&limit.permits).acquire_owned().await;
        limit.waiting.fetch_sub(1, Ordering::SeqCst);
        permit
            .map(Some)
            .map_err(|_| of_kind(ErrorKind::Unavailable, "the server is shutting down"))
    }

    /// A slot for one changelog subscription, held as long as it streams.
    pub fn open_subscription(&self) -> Result<Option<OwnedSemaphorePermit>> {
        take_now(&self.subscriptions, |max| {
            format!(
                "tenant '{}' has max_subscriptions = {max} open; close one or retry later",
                self.name
            )
        })
    }

    /// A slot for one streaming write, held as long as it streams.
    pub fn open_stream(&self) -> Result<Option<OwnedSemaphorePermit>> {
        take_now(&self.streams, |max| {
            format!(
                "tenant '{}' has max_streams = {max} streaming writes open; end one or retry later",
                self.name
            )
        })
    }
}

/// The tenants a server serves, by name.
#[derive(Debug)]
pub struct Tenants {
    by_name: BTreeMap<String, Arc<Tenant>>,
}

impl Tenants {
    /// The tenants of `configured`, or the implicit tenant on `root` when none is.
    pub fn open(
        configured: &[TenantOptions],
        root: &str,
        limits: &SqlLimits,
        storage: &crate::io::StorageOptions,
    ) -> Result<Self> {
        let mut by_name = BTreeMap::new();
        if configured.is_empty() {
            let t = Tenant::open(CATALOG_NAME, root, limits.clone(), storage)?;
            by_name.insert(CATALOG_NAME.to_string(), Arc::new(t));
            return Ok(Self { by_name });
        }
        let mut roots: Vec<(String, std::path::PathBuf)> = Vec::new();
        let mut remote: Vec<(String, String)> = Vec::new();
        for c in configured {
            crate::spec::identifier::validate_name("tenant", &c.name)?;
            let mut t = Tenant::open(&c.name, &c.warehouse, c.limits.clone(), storage)?;
            t.statements = c.max_concurrent_statements.map(Limit::new);
            t.subscriptions = c.max_subscriptions.map(Limit::new);
            t.streams = c.max_streams.map(Limit::new);
            if let Some(local) = t.engine.catalog().io().local_root() {
                for (other, r) in &roots {
                    if local.starts_with(r) || r.starts_with(local) {
                        return invalid!(
                            "config: the warehouses of tenants '{other}' and '{}' overlap",
                            c.name
                        );
                    }
                }
                roots.push((c.name.clone(), local.to_path_buf()));
            } else if t.engine.catalog().io().is_remote() {
                let uri = format!("{}/", t.engine.catalog().io().uri());
                if let Some((other, _)) = remote
                    .iter()
                    .find(|(_, u)| u.starts_with(&uri) || uri.starts_with(u.as_str()))
                {
                    return invalid!(
                        "config: the warehouses of tenants '{other}' and '{}' overlap",
                        c.name
                    );
                }
                remote.push((c.name.clone(), uri));
            }
            if by_name.insert(c.name.clone(), Arc::new(t)).is_some() {
                return invalid!("config: tenant '{}' is listed twice", c.name);
            }
        }
        Ok(Self { by_name })
    }

    /// Limits the implicit tenant's streaming writes (`[ingest] max_streams`); configured
    /// tenants have theirs. Only before the tenants are shared.
    pub fn limit_implicit_streams(&mut self, max: usize) {
        if let Some(t) = self.by_name.get_mut(CATALOG_NAME).and_then(Arc::get_mut) {
            if t.streams.is_none() {
                t.streams = Some(Limit::new(max));
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<Tenant>> {
        self.by_name.get(name).cloned()
    }

    /// Whether only the implicit tenant is served (no `[[tenants]]`).
    pub fn implicit(&self) -> bool {
        self.by_name.len() == 1 && self.by_name.contains_key(CATALOG_NAME)
    }

    /// Checks that each tenant's warehouse can be read and written (object stores), then creates
    /// its `default` database.
    pub async fn prepare(&self) -> Result<()> {
        for t in self.by_name.values() {
            t.engine.catalog().io().probe(true).await?;
            t.engine.catalog().create_database("default", true).await?;
        }
        Ok(())
    }

    /// The implicit tenant of an in-memory warehouse (unit tests).
    #[cfg(test)]
    pub fn in_memory() -> Self {
        Self::open(&[], "memory://", &SqlLimits::default(), &Default::default())
            .expect("in-memory warehouse")
    }
}

/// The default warehouse of tenant `name` under the server's `root`.
pub fn default_warehouse(root: &str, name: &str) -> String {
    format!("{}/tenants/{name}", root.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(name: &str, warehouse: &str) -> TenantOptions {
        TenantOptions {
            name: name.into(),
            warehouse: warehouse.into(),
            limits: SqlLimits::default(),
            max_concurrent_statements: Some(1),
            max_subscriptions: Some(1),
            max_streams: Some(1),
        }
    }

    #[test]
    fn overlapping_or_repeated_tenants_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let a = default_warehouse(&root, "a");
        let e = Tenants::open(
            &[options("a", &a), options("b", &format!("{a}/inner"))],
            &root,
            &SqlLimits::default(),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overlap"), "{e}");
        let e = Tenants::open(
            &[
                options("a", &a),
                options("a", &default_warehouse(&root, "a2")),
            ],
            &root,
            &SqlLimits::default(),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("listed twice"), "{e}");
        let e = Tenants::open(
            &[options("../x", &a)],
            &root,
            &SqlLimits::default(),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("invalid tenant name"), "{e}");
        let t = Tenants::open(
            &[
                options("a", &a),
                options("b", &default_warehouse(&root, "b")),
            ],
            &root,
            &SqlLimits::default(),
            &Default::default(),
        )
        .unwrap();
        assert!(!t.implicit());
        assert_eq!(t.get("a").unwrap().engine.catalog_name(), "a");
        assert!(Tenants::in_memory().implicit());
    }

    #[tokio::test]
    async fn limits_admit_then_queue_then_refuse() {
        let t = Tenants::open(
            &[options("a", "memory://")],
            "memory://",
            &SqlLimits::default(),
            &Default::default(),
        )
        .unwrap()
        .get("a")
        .unwrap();
        let first = t.admit_statement().await.unwrap();
        assert!(first.is_some());
        // The second waits (the queue holds one), the third is refused at once.
        let t2 = Arc::clone(&t);
        let waiting = tokio::spawn(async move { t2.admit_statement().await.map(|p| p.is_some()) });
        while t
            .statements
            .as_ref()
            .unwrap()
            .waiting
            .load(std::sync::atomic::Ordering::SeqCst)
            == 0
        {
            tokio::task::yield_now().await;
        }
        let e = t.admit_statement().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
        assert!(
            e.to_string().contains("max_concurrent_statements = 1"),
            "{e}"
        );
        drop(first);
        assert!(waiting.await.unwrap().unwrap());
        let sub = t.open_subscription().unwrap();
        assert!(sub.is_some());
        let e = t.open_subscription().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
        assert!(e.to_string().contains("max_subscriptions = 1"), "{e}");
    }
}
