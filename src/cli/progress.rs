//! The CLI's view of a long operation: a progress bar on stderr (a line per phase when stderr is
//! not a terminal) and Ctrl-C as cancellation.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use tidelake::table::progress::{Operation, Progress};

const WIDTH: usize = 30;

fn bar(p: &Progress) -> String {
    let counts = if p.total > 0 {
        let filled = (p.done.min(p.total) as usize * WIDTH) / p.total as usize;
        format!(
            "[{}{}] {}/{}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            p.done,
            p.total
        )
    } else {
        format!("{} done", p.done)
    };
    let files = if p.files > 0 {
        format!(", {} file(s), {} bytes", p.files, p.bytes)
    } else {
        String::new()
    };
    format!("{}: {counts}{files}", p.phase)
}

/// Runs `work` (which reports to `op`), drawing its progress until it ends; the first Ctrl-C
/// cancels it (it stops at its next safe point), a second one exits at once (status 130).
pub(crate) async fn run<T>(op: &Operation, work: impl Future<Output = T>) -> T {
    let tty = std::io::stderr().is_terminal();
    let mut rx = op.watch();
    let cancel = op.clone();
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ncancelling (the operation stops at its next safe point; Ctrl-C again to quit now)...");
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let draw = async {
        let mut phase = String::new();
        loop {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            let p = rx.borrow_and_update().clone();
            if tty {
                eprint!("\r\x1b[2K{}", bar(&p));
                let _ = std::io::stderr().flush();
            } else if p.phase != phase {
                eprintln!("{}", bar(&p));
            }
            phase = p.phase;
            // A bar need not move more often than this.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let out = tokio::select! {
        out = work => out,
        _ = draw => unreachable!("draw never ends"),
    };
    interrupt.abort();
    // Where it ended, whatever was drawn before.
    if tty {
        eprintln!("\r\x1b[2K{}", bar(&op.progress()));
    } else {
        eprintln!("{}", bar(&op.progress()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars() {
        let p = Progress {
            phase: "compacting buckets".into(),
            done: 3,
            total: 4,
            files: 2,
            bytes: 1024,
        };
        assert_eq!(
            bar(&p),
            "compacting buckets: [######################--------] 3/4, 2 file(s), 1024 bytes"
        );
        let p = Progress {
            phase: "listing files".into(),
            ..Default::default()
        };
        assert_eq!(bar(&p), "listing files: 0 done");
    }
}
