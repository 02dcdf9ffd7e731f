//! `deduplicate`: the newest record of a key wins, with its own row kind; with `ignore-delete`
//! the newest added record wins.

use super::{GroupInput, Merged};

pub(super) fn merge(g: &GroupInput<'_>, ignore_delete: bool) -> Merged {
    let winner = if ignore_delete {
        g.rows.iter().rev().copied().find(|&r| !g.is_retract(r))
    } else {
        g.rows.last().copied()
    };
    winner.map(Merged::Row).unwrap_or(Merged::Nothing)
}
