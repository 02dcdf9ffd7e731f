//! The CLI's view of a long operation: an indicatif bar with rate and ETA on stderr (a plain line
//! per phase when stderr is not a terminal, the format scripts read) and Ctrl-C as cancellation.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use tidelake::table::progress::{Operation, Progress};

const WIDTH: usize = 30;

/// One phase as a plain line: `compacting buckets: [####------] 3/4, 2 file(s), 1024 bytes`.
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

/// A terminal's bar (indicatif: rate and ETA), redrawn in place, one phase after another.
struct TerminalBar {
    bar: indicatif::ProgressBar,
    phase: String,
}

impl TerminalBar {
    fn new() -> Self {
        Self {
            bar: indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            ),
            phase: String::new(),
        }
    }

    fn show(&mut self, p: &Progress) {
        if p.phase != self.phase {
            // The finished phase stays on screen; the next one gets a fresh bar.
            if !self.phase.is_empty() {
                self.bar.finish();
                self.bar = indicatif::ProgressBar::with_draw_target(
                    None,
                    indicatif::ProgressDrawTarget::stderr(),
                );
            }
            let template = if p.total > 0 {
                "{prefix}: [{bar:30}] {pos}/{len} {msg} ({per_sec}, eta {eta})"
            } else {
                "{spinner} {prefix}: {pos} done {msg} ({elapsed})"
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                self.bar.set_style(style.progress_chars("#>-"));
            }
            self.bar.set_prefix(p.phase.clone());
            self.phase = p.phase.clone();
        }
        if p.total > 0 {
            self.bar.set_length(p.total);
        }
        self.bar.set_position(p.done);
        if p.files > 0 {
            self.bar.set_message(format!(
                "{} file(s), {}",
                p.files,
                indicatif::HumanBytes(p.bytes)
            ));
        }
    }

    fn finish(&mut self, p: &Progress) {
        self.show(p);
        self.bar.finish();
    }
}

/// Runs `work` (which reports to `op`), drawing its progress until it ends: a bar on a terminal,
/// otherwise one line per phase (and a last one with the final counts). The first Ctrl-C cancels
/// it (it stops at its next safe point), a second one exits at once (status 130).
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
    let mut terminal = tty.then(TerminalBar::new);
    let draw = async {
        let mut phase = String::new();
        loop {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            let p = rx.borrow_and_update().clone();
            // Nothing to say before the operation names its first phase.
            if !p.phase.is_empty() {
                match terminal.as_mut() {
                    Some(t) => t.show(&p),
                    None if p.phase != phase => {
                        eprintln!("{}", bar(&p));
                        let _ = std::io::stderr().flush();
                    }
                    None => {}
                }
                phase = p.phase;
            }
            // A bar need not move more often than this.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let out = tokio::select! {
        out = work => out,
        _ = draw => unreachable!("draw never ends"),
    };
    interrupt.abort();
    // Where it ended, whatever was drawn before (an operation that had nothing to do and named
    // no phase prints nothing).
    let last = op.progress();
    if !last.phase.is_empty() {
        match terminal.as_mut() {
            Some(t) => t.finish(&last),
            None => eprintln!("{}", bar(&last)),
        }
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
