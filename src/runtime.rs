//! The runtimes, and the only place that builds one (STYLE rule 9).
//!
//! - The **IO runtime** ([`io_runtime`]) runs `main`: tonic's connections, the Flight handlers'
//!   thin outer layer, timers and storage requests of the CLI.
//! - **Work threads** ([`WorkPool`]) run what a request costs: parsing, planning and executing SQL
//!   (DataFusion), merges, Parquet encoding and decoding, ingest, compaction and the other
//!   maintenance operations. Each call gets its own OS thread, with a stack large enough for the
//!   statement limits of the SQL layer, driving its own small runtime; the IO runtime
//!   only forwards the call's results. A thread whose call has ended (with every task it spawned)
//!   waits a while for the next call instead of ending, so short calls create no threads.
//!
//! Why a thread per call instead of one shared pool: the kernel's scheduler time-slices threads,
//! so a `SELECT 1` gets a turn within milliseconds however many cartesian joins run beside it,
//! whether or not their operators yield. A shared pool would make it wait until a worker
//! finishes a poll of someone else's plan. Admission ([`WorkPool::admit`]) bounds how many such
//! threads run, in total and per user, so one user's thousand queries wait their turn while
//! another's start at once.
//!
//! ```text
//!  IO runtime ──admit──► thread "tidelake-work" ─► runtime ─► fut ─► items ─► bounded channel
//!      ▲                                                                          │
//!      └───────────── forwards items, ends the call at its deadline ◄─────────────┘
//! ```
//!
//! A panic on a work thread is caught, logged and returned as an error; the process stays up.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::stream::{BoxStream, Stream, StreamExt};
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

/// Stack of an IO-runtime thread: handlers there only decode messages and forward streams.
pub const IO_STACK_BYTES: usize = 8 * 1024 * 1024;

/// How long a work thread waits at its end for its runtime's blocking tasks.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a work thread waits, after its call ended, for tasks the call spawned.
pub const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Stack of a work thread (address space; only the pages a deep statement touches are used).
/// The SQL layer's statement limits keep statements shallow enough for it, with a wide margin.
pub const WORK_STACK_BYTES: usize = 64 * 1024 * 1024;

/// The runtime `main` runs on.
pub fn io_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("tidelake-io")
        .thread_stack_size(IO_STACK_BYTES)
        .enable_all()
        .build()
}

/// How many work threads may run: in all, and for one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkLimits {
    pub max_concurrent: usize,
    pub max_concurrent_per_user: usize,
    /// Worker threads of each call's runtime (DataFusion's partitions run on them).
    pub threads_per_call: usize,
}

impl Default for WorkLimits {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            max_concurrent: 64,
            max_concurrent_per_user: 8,
            threads_per_call: cores.min(4),
        }
    }
}

thread_local! {
    /// Set on a work thread and on its runtime's threads ([`on_work_thread`]).
    static WORK_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the current thread runs a call's work: there a short blocking system call (a local
/// file's `stat`, reading a small metadata file) costs the call less than handing it to a
/// blocking thread and waking up again, and blocks no one else's call. The IO runtime's
/// threads answer `false`.
pub fn on_work_thread() -> bool {
    WORK_THREAD.with(std::cell::Cell::get)
}

fn mark_work_thread() {
    WORK_THREAD.with(|w| w.set(true));
}

/// A panic on a work thread, turned into a message (the error type decides its status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panicked(pub String);

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "internal error: the request panicked: {}", self.0)
    }
}

/// Permission to run one call on a work thread; released when dropped.
#[derive(Debug)]
pub struct Admission {
    _global: OwnedSemaphorePermit,
    _user: OwnedSemaphorePermit,
}

/// Runs calls on work threads. Cheap to clone; clones share the admission limits.
#[derive(Debug, Clone)]
pub struct WorkPool {
    limits: WorkLimits,
    global: Arc<Semaphore>,
    users: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl Default for WorkPool {
    fn default() -> Self {
        Self::new(WorkLimits::default())
    }
}

type Job = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

impl WorkPool {
    pub fn new(limits: WorkLimits) -> Self {
        let limits = WorkLimits {
            max_concurrent: limits.max_concurrent.max(1),
            max_concurrent_per_user: limits.max_concurrent_per_user.max(1),
            threads_per_call: limits.threads_per_call.max(1),
        };
        Self {
            limits,
            global: Arc::new(Semaphore::new(limits.max_concurrent)),
            users: Arc::default(),
        }
    }

    pub fn limits(&self) -> WorkLimits {
        self.limits
    }

    /// Waits for a free slot for `user` (FIFO per semaphore): first the user's own, then one of
    /// the shared ones, so a user at their limit never holds a shared slot while waiting.
    pub async fn admit(&self, user: &str) -> Admission {
        let per_user =
            {
                // A poisoned lock only means another thread panicked while holding it; the map
                // itself is always consistent (one insert).
                let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
                Arc::clone(users.entry(user.to_string()).or_insert_with(|| {
                    Arc::new(Semaphore::new(self.limits.max_concurrent_per_user))
                }))
            };
        // Neither semaphore is ever closed, so acquiring cannot fail.
        let user_permit = per_user.acquire_owned().await;
        let global_permit = Arc::clone(&self.global).acquire_owned().await;
        match (global_permit, user_permit) {
            (Ok(g), Ok(u)) => Admission {
                _global: g,
                _user: u,
            },
            _ => unreachable_closed(),
        }
    }

    /// Starts `job` on a work thread with its own runtime: `threads` workers (1: the thread
    /// itself drives everything). A thread whose call ended, with every task it spawned (a
    /// cancelled operation finishing its cleanup, a commit in flight), waits [`IDLE_KEEP`] for
    /// another call of the same size and runs it on the same runtime: a point query costs no
    /// thread creation (before, every call created its thread, its runtime's workers and its
    /// blocking threads, about a dozen per bound query). A thread whose tasks outlive
    /// [`DRAIN_GRACE`] is not reused.
    fn start(&self, threads: usize, job: Job) -> std::io::Result<()> {
        let job = match idle::hand_over(threads, job) {
            Ok(()) => return Ok(()),
            Err(job) => job,
        };
        let handle = std::thread::Builder::new()
            .name("tidelake-work".into())
            .stack_size(WORK_STACK_BYTES)
            .spawn(move || {
                mark_work_thread();
                let mut builder = if threads <= 1 {
                    tokio::runtime::Builder::new_current_thread()
                } else {
                    let mut b = tokio::runtime::Builder::new_multi_thread();
                    b.worker_threads(threads);
                    b
                };
                let rt = match builder
                    .thread_name("tidelake-work")
                    .thread_stack_size(WORK_STACK_BYTES)
                    .on_thread_start(mark_work_thread)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot build a work runtime");
                        return;
                    }
                };
                let mut job = job;
                loop {
                    rt.block_on(async move {
                        job.await;
                        let until = tokio::time::Instant::now() + DRAIN_GRACE;
                        let metrics = tokio::runtime::Handle::current().metrics();
                        while metrics.num_alive_tasks() > 0 && tokio::time::Instant::now() < until {
                            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        }
                    });
                    if rt.metrics().num_alive_tasks() > 0 {
                        break;
                    }
                    match idle::wait(threads) {
                        Some(next) => job = next,
                        None => break,
                    }
                }
                // Joins the runtime's threads (a blocking file read of a cancelled scan finishes
                // first). Not `shutdown_background`: it detaches threads while they exit, and
                // glibc then races to unmap a large stack the detaching thread still reads.
                rt.shutdown_timeout(SHUTDOWN_WAIT);
            })?;
        reap(Some(handle));
        Ok(())
    }

    fn threads(&self, admission: &Option<Admission>) -> usize {
        // Admitted calls are the costly ones; the others (subscriptions, which mostly wait)
        // get the thread alone.
        if admission.is_some() {
            self.limits.threads_per_call
        } else {
            1
        }
    }

    /// Runs `fut` on a work thread and returns its output. A panic becomes `on_panic(..)`;
    /// dropping the returned future stops `fut` at its next await. `admission` is held until
    /// the work ends.
    pub async fn run<T, E, F>(
        &self,
        admission: Option<Admission>,
        fut: F,
        on_panic: fn(Panicked) -> E,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let threads = self.threads(&admission);
        let (tx, rx) = oneshot::channel::<Result<T, E>>();
        let job = async move {
            let _admission = admission;
            let mut tx = tx;
            let out = tokio::select! {
                out = AssertUnwindSafe(fut).catch_unwind() => out,
                // The caller went away: stop here.
                _ = tx.closed() => return,
            };
            let _ = tx.send(out.unwrap_or_else(|p| Err(on_panic(panicked(p)))));
        };
        if let Err(e) = self.start(threads, Box::pin(job)) {
            return Err(on_panic(Panicked(format!(
                "cannot start a work thread: {e}"
            ))));
        }
        rx.await
            .unwrap_or_else(|_| Err(on_panic(Panicked("the work thread stopped".into()))))
    }

    /// Runs `fut` on a work thread, then drives the stream it returns there, forwarding each
    /// item through a small bounded channel (the consumer's pace is the producer's). `fut` also
    /// returns a head (a response's metadata), handed back with the stream. Dropping the
    /// returned stream stops the work at its next await.
    pub async fn run_stream<H, T, E, F, S>(
        &self,
        admission: Option<Admission>,
        fut: F,
        on_panic: fn(Panicked) -> E,
    ) -> Result<(H, BoxStream<'static, Result<T, E>>), E>
    where
        F: Future<Output = Result<(H, S), E>> + Send + 'static,
        S: Stream<Item = Result<T, E>> + Send + 'static,
        H: Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let threads = self.threads(&admission);
        self.run_stream_on(threads, admission, fut, on_panic).await
    }

    /// [`Self::run_stream`] on a work thread with `threads` workers, whatever the admission (a
    /// call whose admission is held elsewhere, to be given back early).
    pub async fn run_stream_on<H, T, E, F, S>(
        &self,
        threads: usize,
        admission: Option<Admission>,
        fut: F,
        on_panic: fn(Panicked) -> E,
    ) -> Result<(H, BoxStream<'static, Result<T, E>>), E>
    where
        F: Future<Output = Result<(H, S), E>> + Send + 'static,
        S: Stream<Item = Result<T, E>> + Send + 'static,
        H: Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let threads = threads.max(1);
        let (first_tx, first_rx) = oneshot::channel::<Result<H, E>>();
        let (tx, rx) = mpsc::channel::<Result<T, E>>(2);
        let job = async move {
            let _admission = admission;
            let closed = tx.clone();
            let work = async move {
                let (head, stream) = match AssertUnwindSafe(fut).catch_unwind().await {
                    Ok(Ok(started)) => started,
                    Ok(Err(e)) => {
                        let _ = first_tx.send(Err(e));
                        return;
                    }
                    Err(p) => {
                        let _ = first_tx.send(Err(on_panic(panicked(p))));
                        return;
                    }
                };
                if first_tx.send(Ok(head)).is_err() {
                    return;
                }
                let mut stream = std::pin::pin!(AssertUnwindSafe(stream).catch_unwind());
                while let Some(item) = stream.next().await {
                    let item = match item {
                        Ok(item) => item,
                        Err(p) => {
                            let _ = tx.send(Err(on_panic(panicked(p)))).await;
                            return;
                        }
                    };
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = work => {}
                _ = closed.closed() => {}
            }
        };
        if let Err(e) = self.start(threads, Box::pin(job)) {
            return Err(on_panic(Panicked(format!(
                "cannot start a work thread: {e}"
            ))));
        }
        match first_rx.await {
            Ok(Ok(head)) => Ok((
                head,
                tokio_stream::wrappers::ReceiverStream::new(rx).boxed(),
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(on_panic(Panicked("the work thread stopped".into()))),
        }
    }
}

/// How long a work thread whose call ended waits for another before it ends.
pub const IDLE_KEEP: std::time::Duration = std::time::Duration::from_secs(30);

/// At most this many work threads wait for a call at once; more end at once.
const MAX_IDLE: usize = 16;

/// Work threads waiting for their next call.
mod idle {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;
    use std::sync::Mutex;

    use super::{Job, IDLE_KEEP, MAX_IDLE};

    /// `(runtime workers, waiter id, where to send its next call)`.
    type Waiter = (usize, u64, mpsc::Sender<Job>);

    static WAITING: Mutex<Vec<Waiter>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);

    fn waiting() -> std::sync::MutexGuard<'static, Vec<Waiter>> {
        // Poisoned only if a thread panicked while pushing or removing; the list is still whole.
        WAITING.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives `job` to a waiting thread whose runtime has `threads` workers; `Err(job)` when none
    /// waits.
    pub(super) fn hand_over(threads: usize, mut job: Job) -> Result<(), Job> {
        loop {
            let waiter = {
                let mut w = waiting();
                match w.iter().rposition(|(n, _, _)| *n == threads) {
                    Some(i) => w.swap_remove(i),
                    None => return Err(job),
                }
            };
            // A waiter is removed from the list before it stops listening, so a send only
            // fails if it ended some other way; then try the next.
            match waiter.2.send(job) {
                Ok(()) => return Ok(()),
                Err(mpsc::SendError(back)) => job = back,
            }
        }
    }

    /// Waits up to [`IDLE_KEEP`] for a call for this thread (its runtime has `threads`
    /// workers); `None`: none came, or enough threads wait already, and the thread ends.
    pub(super) fn wait(threads: usize) -> Option<Job> {
        let (tx, rx) = mpsc::channel();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        {
            let mut w = waiting();
            if w.len() >= MAX_IDLE {
                return None;
            }
            w.push((threads, id, tx));
        }
        if let Ok(job) = rx.recv_timeout(IDLE_KEEP) {
            return Some(job);
        }
        // Leave the list, then take a call sent before leaving it (none can come after).
        waiting().retain(|(_, i, _)| *i != id);
        rx.try_recv().ok()
    }
}

/// Work threads started and not yet joined. They are joined once finished (joining a finished
/// thread does not block), never detached: see [`WorkPool::start`].
static STARTED: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

/// Joins the finished work threads and records `new`.
fn reap(new: Option<std::thread::JoinHandle<()>>) {
    let finished: Vec<_> = {
        // Poisoned only if a thread panicked while pushing; the list is still whole.
        let mut started = STARTED.lock().unwrap_or_else(|p| p.into_inner());
        let (finished, running) = std::mem::take(&mut *started)
            .into_iter()
            .partition(|h: &std::thread::JoinHandle<()>| h.is_finished());
        *started = running;
        started.extend(new);
        finished
    };
    for h in finished {
        let _ = h.join();
    }
}

fn unreachable_closed() -> ! {
    // Both semaphores live as long as the pool and are never closed.
    panic!("a work-pool semaphore was closed")
}

/// The message of a caught panic, logged once here.
fn panicked(p: Box<dyn std::any::Any + Send>) -> Panicked {
    let message = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    tracing::error!(panic = %message, "a request panicked; answered as an internal error");
    Panicked(message)
}

/// `stream` ended at `deadline`: after it, the next item is `on_timeout()` and the stream ends
/// (dropping `stream`, which stops the work behind it). The deadline holds even while the work
/// is inside one long computation, since this side only waits on the channel.
pub fn with_deadline<T, E>(
    stream: BoxStream<'static, Result<T, E>>,
    deadline: tokio::time::Instant,
    on_timeout: impl Fn() -> E + Send + 'static,
) -> BoxStream<'static, Result<T, E>>
where
    T: Send + 'static,
    E: Send + 'static,
{
    futures::stream::unfold(Some((stream, on_timeout)), move |state| async move {
        let (mut s, on_timeout) = state?;
        match tokio::time::timeout_at(deadline, s.next()).await {
            // An item that arrives after the deadline (computed in one long poll) fails too.
            Ok(Some(item)) if tokio::time::Instant::now() <= deadline => {
                Some((item, Some((s, on_timeout))))
            }
            Ok(None) => None,
            _ => Some((Err(on_timeout()), None)),
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_string(p: Panicked) -> String {
        p.to_string()
    }

    #[test]
    fn a_waiting_thread_takes_the_next_call_of_its_size_only() {
        // Sizes no pool of this process uses, so other tests' threads are not involved.
        let (size, other) = (1001, 1002);
        assert!(
            idle::hand_over(size, Box::pin(async {})).is_err(),
            "none waits yet"
        );
        let waiter = std::thread::spawn(move || idle::wait(size).is_some());
        let mut job: Job = Box::pin(async {});
        // Until the thread waits, the call comes back; a waiter of another size never takes it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            assert!(idle::hand_over(other, Box::pin(async {})).is_err());
            match idle::hand_over(size, job) {
                Ok(()) => break,
                Err(back) => job = back,
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the thread never waited"
            );
            std::thread::park_timeout(std::time::Duration::from_millis(5));
        }
        assert!(waiter.join().unwrap(), "the waiting thread got the call");
    }

    #[tokio::test]
    async fn a_panic_on_a_work_thread_is_an_error() {
        let pool = WorkPool::default();
        let r: Result<(), String> = pool.run(None, async { panic!("boom") }, as_string).await;
        assert!(r.unwrap_err().contains("boom"));
        let ok: Result<i32, String> = pool
            .run(Some(pool.admit("u").await), async { Ok(7) }, as_string)
            .await;
        assert_eq!(ok, Ok(7));
    }

    #[tokio::test]
    async fn work_threads_and_their_runtimes_threads_know_they_are_one() {
        assert!(!on_work_thread(), "a test's runtime is not a work thread");
        let pool = WorkPool::default();
        let on: Result<(bool, bool), String> = pool
            .run(
                Some(pool.admit("u").await),
                async {
                    let spawned = tokio::spawn(async { on_work_thread() })
                        .await
                        .unwrap_or(false);
                    Ok((on_work_thread(), spawned))
                },
                as_string,
            )
            .await;
        assert_eq!(on, Ok((true, true)));
        assert!(!on_work_thread());
    }

    #[tokio::test]
    async fn a_deep_recursion_fits_a_work_thread() {
        fn depth(n: u64) -> u64 {
            // 4 KiB per frame: 10,000 frames need 40 MiB, far beyond a default 2 MiB stack.
            let pad = std::hint::black_box([0u8; 4096]);
            if n == 0 {
                pad[0] as u64
            } else {
                depth(n - 1) + pad[(n % 4096) as usize] as u64 + 1
            }
        }
        let pool = WorkPool::default();
        let r: Result<u64, String> = pool.run(None, async { Ok(depth(10_000)) }, as_string).await;
        assert_eq!(r, Ok(10_000));
    }

    #[tokio::test]
    async fn streams_are_forwarded_and_panics_mid_stream_are_errors() {
        let pool = WorkPool::default();
        let (_, s) = pool
            .run_stream(
                None,
                async {
                    Ok((
                        (),
                        futures::stream::iter(0..3).map(|i| {
                            if i == 2 {
                                panic!("third item")
                            }
                            Ok::<_, String>(i)
                        }),
                    ))
                },
                as_string,
            )
            .await
            .unwrap();
        let items: Vec<_> = s.collect().await;
        assert_eq!(items[..2], [Ok(0), Ok(1)]);
        assert!(items[2].as_ref().unwrap_err().contains("third item"));
    }

    #[tokio::test]
    async fn the_deadline_ends_a_stream_stuck_in_one_computation() {
        let pool = WorkPool::default();
        let (_, s) = pool
            .run_stream(
                Some(pool.admit("u").await),
                async {
                    Ok((
                        (),
                        futures::stream::once(async {
                            // One long blocking computation, no await inside.
                            let until =
                                std::time::Instant::now() + std::time::Duration::from_secs(3);
                            while std::time::Instant::now() < until {
                                std::hint::spin_loop();
                            }
                            Ok::<_, String>(1)
                        }),
                    ))
                },
                as_string,
            )
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(200);
        let items: Vec<_> = with_deadline(s, deadline, || "timeout".to_string())
            .collect()
            .await;
        assert_eq!(items, vec![Err("timeout".to_string())]);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[tokio::test]
    async fn admission_is_bounded_per_user_and_in_total() {
        let pool = WorkPool::new(WorkLimits {
            max_concurrent: 3,
            max_concurrent_per_user: 2,
            threads_per_call: 1,
        });
        let a1 = pool.admit("a").await;
        let _a2 = pool.admit("a").await;
        // "a" is at its limit; "b" still gets in.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), pool.admit("a"));
        assert!(waiting.await.is_err());
        let _b = pool.admit("b").await;
        drop(a1);
        let again = tokio::time::timeout(std::time::Duration::from_secs(5), pool.admit("a"));
        assert!(again.await.is_ok());
    }
}
