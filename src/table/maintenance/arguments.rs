//! The arguments every door passes to maintenance, checked once: Paimon's durations, `KEY=VALUE`
//! pairs, and the counting rules of `ExpireSnapshotsImpl` and `SchemaValidation` (a count below 1
//! is refused, and so is a `retain_max` below `retain_min`: never silently clamped).

use crate::error::{invalid, Result};

/// `text` as a Paimon duration in milliseconds; `what` names the argument in the error.
pub fn duration_millis(what: &str, text: &str) -> Result<i64> {
    match crate::spec::options::retention_millis(text) {
        Some(ms) => Ok(ms),
        None => invalid!("{what}: invalid duration '{text}' (use e.g. '1 h', '30 min', '10 s')"),
    }
}

/// `KEY=VALUE` (a partition or an option argument); `what` names it in the error.
pub fn key_value(text: &str, what: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => invalid!("{what} '{text}' must look like KEY=VALUE"),
    }
}

/// A count argument that must be at least 1.
pub(super) fn at_least_one(what: &str, v: Option<i64>) -> Result<Option<i64>> {
    match v {
        Some(n) if n < 1 => invalid!("{what} must be at least 1 (got {n})"),
        other => Ok(other),
    }
}

/// The table options' rule, for the arguments ([`crate::spec::options::retained_in_order`]).
pub(super) fn max_not_below_min(max: i64, min: i64) -> Result<()> {
    crate::spec::options::retained_in_order(("retain_max", max), ("retain_min", min))
}

/// A name argument (tag, branch) that must not be blank; `what` names the operation.
pub(super) fn named(operation: &str, kind: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return invalid!("{operation} needs a {kind} name");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_and_durations() {
        assert_eq!(
            key_value(" dt = 2024-01-01 ", "partition").unwrap(),
            ("dt".to_string(), "2024-01-01".to_string())
        );
        assert!(key_value("=1", "partition").is_err());
        assert!(key_value("dt", "partition").is_err());
        assert_eq!(duration_millis("older_than", "30 min").unwrap(), 1_800_000);
        assert_eq!(
            duration_millis("older_than", "soon")
                .unwrap_err()
                .to_string(),
            "older_than: invalid duration 'soon' (use e.g. '1 h', '30 min', '10 s')"
        );
        assert_eq!(at_least_one("n", Some(1)).unwrap(), Some(1));
        assert!(at_least_one("n", Some(0)).is_err());
        assert_eq!(
            named("delete_tag", "tag", " ").unwrap_err().to_string(),
            "delete_tag needs a tag name"
        );
    }
}
