//! `first-row`: the first added record of a key wins; retractions are an error unless
//! `ignore-delete` drops them.

use super::{GroupInput, Merged};
use crate::error::{invalid_argument, Result};

const REJECT_RETRACT: &str =
    "By default, First row merge engine can not accept DELETE/UPDATE_BEFORE records.\n\
     You can config 'ignore-delete' to ignore the DELETE/UPDATE_BEFORE records.";

pub(super) fn merge(g: &GroupInput<'_>, ignore_delete: bool) -> Result<Merged> {
    for &r in g.rows {
        if g.is_retract(r) {
            if ignore_delete {
                continue;
            }
            return Err(invalid_argument(REJECT_RETRACT));
        }
        return Ok(Merged::Row(r));
    }
    Ok(Merged::Nothing)
}
