//! `partial-update`: later records fill in the non-null fields of earlier ones; sequence groups
//! order sets of fields independently and may carry aggregate functions.

use crate::error::{internal, invalid_argument, Result};
use std::cmp::Ordering;

use super::aggregate::AggState;
use super::config::MergeConfig;
use super::{GroupInput, Merged};
use crate::spec::binary_row::Datum;
use crate::spec::RowKind;

/// Paimon's refusal, on one line (its text, so users searching for it find the same solutions).
const REJECT_DELETE: &str = "By default, Partial update can not accept delete records; choose one of: \
(1) 'ignore-delete' = 'true' to ignore delete records, \
(2) 'partial-update.remove-record-on-delete' = 'true' to remove the whole row, \
(3) 'sequence-group's to retract partial columns (with 'partial-update.remove-record-on-sequence-group' to remove the whole row)";

struct State<'c> {
    config: &'c MergeConfig,
    row: Vec<Datum>,
    aggs: Vec<Option<AggState>>,
    meet_insert: bool,
    current_delete: bool,
    filled: bool,
}

fn check_not_null(config: &MergeConfig, values: &[Datum]) -> Result<()> {
    for (i, v) in values.iter().enumerate() {
        if v.is_null() && !config.types[i].nullable {
            return Err(invalid_argument(format!("Field {i} can not be null")));
        }
    }
    Ok(())
}

/// Compares the sequence fields of a group in `input` with those in `row` (NULL is oldest).
fn compare_group(seq: &[usize], input: &[Datum], row: &[Datum]) -> Ordering {
    for &p in seq {
        let c = input[p].compare(&row[p]).unwrap_or(Ordering::Equal);
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

impl State<'_> {
    fn set_row(&mut self, values: &[Datum]) -> Result<()> {
        check_not_null(self.config, values)?;
        self.row = values.to_vec();
        for (i, a) in self.aggs.iter_mut().enumerate() {
            if let Some(a) = a {
                *a = AggState::new(self.row[i].clone());
            }
        }
        Ok(())
    }

    fn agg_value(&mut self, i: usize, input: &Datum, reversed: bool) -> Result<()> {
        let spec = self.config.aggregators[i]
            .as_ref()
            .ok_or_else(|| internal("a partial-update column without an aggregator"))?;
        let state = self.aggs[i].get_or_insert_with(|| AggState::new(Datum::Null));
        state.value = self.row[i].clone();
        if reversed {
            // An older record: fold the stored value into the input instead.
            let mut older = AggState::new(input.clone());
            older.agg(spec, &self.row[i])?;
            self.row[i] = older.value;
        } else {
            state.agg(spec, input)?;
            self.row[i] = state.value.clone();
        }
        Ok(())
    }

    fn retract_value(&mut self, i: usize, input: &Datum) -> Result<()> {
        let spec = self.config.aggregators[i]
            .as_ref()
            .ok_or_else(|| internal("a partial-update column without an aggregator"))?;
        let state = self.aggs[i].get_or_insert_with(|| AggState::new(Datum::Null));
        state.value = self.row[i].clone();
        state.retract(spec, input)?;
        self.row[i] = state.value.clone();
        Ok(())
    }

    fn add(&mut self, values: &[Datum]) -> Result<()> {
        self.meet_insert = true;
        self.filled = true;
        if self.config.groups.is_empty() {
            for (i, v) in values.iter().enumerate() {
                if !v.is_null() {
                    self.row[i] = v.clone();
                } else if !self.config.types[i].nullable {
                    return Err(invalid_argument(format!("Field {i} can not be null")));
                }
            }
            return Ok(());
        }
        let cmps: Vec<Option<Ordering>> = self
            .config
            .groups
            .iter()
            .map(|g| {
                let all_null = g.sequence_fields.iter().all(|&p| values[p].is_null());
                (!all_null).then(|| compare_group(&g.sequence_fields, values, &self.row))
            })
            .collect();
        for (i, v) in values.iter().enumerate() {
            match self.config.group_of_field[i] {
                None => {
                    if self.config.aggregators[i].is_some() {
                        self.agg_value(i, v, false)?;
                    } else if !v.is_null() {
                        self.row[i] = v.clone();
                    }
                }
                Some(g) => match cmps[g] {
                    None => {}
                    Some(Ordering::Less) if self.config.aggregators[i].is_some() => {
                        self.agg_value(i, v, true)?;
                    }
                    Some(Ordering::Less) => {}
                    Some(_) => {
                        if self.config.groups[g].sequence_fields.contains(&i) {
                            self.row[i] = v.clone();
                        } else if self.config.aggregators[i].is_some() {
                            self.agg_value(i, v, false)?;
                        } else {
                            self.row[i] = v.clone();
                        }
                    }
                },
            }
        }
        Ok(())
    }

    fn retract(&mut self, values: &[Datum], kind: RowKind) -> Result<()> {
        let config = self.config;
        if !self.filled {
            self.set_row(values)?;
            self.filled = true;
        }
        if config.ignore_delete {
            return Ok(());
        }
        if !config.groups.is_empty() {
            for g in &config.groups {
                if g.sequence_fields.iter().all(|&p| values[p].is_null()) {
                    continue;
                }
                if compare_group(&g.sequence_fields, values, &self.row) != Ordering::Less {
                    if kind == RowKind::Delete && g.remove_record_on_delete {
                        self.current_delete = true;
                        self.set_row(values)?;
                        return Ok(());
                    }
                    for &p in &g.sequence_fields {
                        self.row[p] = values[p].clone();
                    }
                    for &p in &g.fields {
                        if config.aggregators[p].is_some() {
                            self.retract_value(p, &values[p])?;
                        } else {
                            self.row[p] = Datum::Null;
                        }
                    }
                } else {
                    for &p in &g.fields {
                        if config.aggregators[p].is_some() {
                            self.retract_value(p, &values[p])?;
                        }
                    }
                }
            }
            return Ok(());
        }
        if config.remove_record_on_delete {
            if kind == RowKind::Delete {
                self.current_delete = true;
                self.set_row(values)?;
            }
            return Ok(());
        }
        Err(invalid_argument(REJECT_DELETE))
    }
}

pub(super) fn merge(g: &GroupInput<'_>, config: &MergeConfig) -> Result<Merged> {
    let mut state = State {
        config,
        row: vec![Datum::Null; config.types.len()],
        aggs: vec![None; config.types.len()],
        meet_insert: false,
        current_delete: false,
        filled: false,
    };
    for &r in g.rows {
        state.current_delete = false;
        let values = g.values(r)?;
        let kind = g.kind(r);
        if kind.is_retract() {
            state.retract(&values, kind)?;
        } else {
            state.add(&values)?;
        }
    }
    let kind = if state.current_delete || !state.meet_insert {
        RowKind::Delete
    } else {
        RowKind::Insert
    };
    let base = *g.rows.last().ok_or_else(|| internal("an empty group"))?;
    Ok(Merged::Built {
        base,
        kind,
        values: state.row,
    })
}
