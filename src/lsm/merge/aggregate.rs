//! Field aggregators of the `aggregation` merge engine (and of partial-update sequence groups):
//! each folds one column's values of a key, and some can take values back out (retraction).
//! Which function a column has, and whether its type allows it, is configuration
//! ([`super::config::AggSpec`]); this module holds the accumulators and the engine's merge.

use crate::error::{internal, invalid_argument, Result};
use std::cmp::Ordering;

use super::config::{AggFunction, AggSpec, MergeConfig};
use crate::spec::binary_row::Datum;

/// The accumulator of one column for one key.
#[derive(Debug, Clone)]
pub(super) struct AggState {
    pub(super) value: Datum,
    /// first_value / first_non_null_value: whether the first value was taken.
    taken: bool,
}

impl AggState {
    pub(super) fn new(initial: Datum) -> Self {
        Self {
            value: initial,
            taken: false,
        }
    }

    /// Folds `input` into the accumulator.
    pub(super) fn agg(&mut self, spec: &AggSpec, input: &Datum) -> Result<()> {
        let acc = std::mem::replace(&mut self.value, Datum::Null);
        self.value = match spec.function {
            AggFunction::PrimaryKey | AggFunction::LastValue => input.clone(),
            AggFunction::LastNonNullValue => {
                if input.is_null() {
                    acc
                } else {
                    input.clone()
                }
            }
            AggFunction::FirstValue => {
                if self.taken {
                    acc
                } else {
                    self.taken = true;
                    input.clone()
                }
            }
            AggFunction::FirstNonNullValue => {
                if self.taken || input.is_null() {
                    acc
                } else {
                    self.taken = true;
                    input.clone()
                }
            }
            AggFunction::Sum => match (&acc, input) {
                (Datum::Null, _) => input.clone(),
                (_, Datum::Null) => acc,
                _ => arith(&acc, input, Op::Add)?,
            },
            AggFunction::Product => match (&acc, input) {
                (Datum::Null, _) => input.clone(),
                (_, Datum::Null) => acc,
                _ => arith(&acc, input, Op::Mul)?,
            },
            AggFunction::Min | AggFunction::Max => match (&acc, input) {
                (Datum::Null, _) => input.clone(),
                (_, Datum::Null) => acc,
                _ => {
                    let acc_less = acc.compare(input) == Some(Ordering::Less);
                    let keep_acc = if spec.function == AggFunction::Min {
                        acc_less
                    } else {
                        !acc_less
                    };
                    if keep_acc {
                        acc
                    } else {
                        input.clone()
                    }
                }
            },
            AggFunction::BoolAnd | AggFunction::BoolOr => match (&acc, input) {
                (Datum::Boolean(a), Datum::Boolean(b)) => {
                    Datum::Boolean(if spec.function == AggFunction::BoolAnd {
                        *a && *b
                    } else {
                        *a || *b
                    })
                }
                (Datum::Null, _) => input.clone(),
                _ => acc,
            },
            AggFunction::ListAgg => listagg(acc, input, spec),
        };
        Ok(())
    }

    /// Takes `input` back out of the accumulator (-U/-D).
    pub(super) fn retract(&mut self, spec: &AggSpec, input: &Datum) -> Result<()> {
        if spec.ignore_retract {
            return Ok(());
        }
        let acc = std::mem::replace(&mut self.value, Datum::Null);
        self.value = match spec.function {
            AggFunction::PrimaryKey => input.clone(),
            AggFunction::LastValue => Datum::Null,
            AggFunction::LastNonNullValue => {
                if input.is_null() {
                    acc
                } else {
                    Datum::Null
                }
            }
            AggFunction::Sum => match (&acc, input) {
                (Datum::Null, _) => negate(input)?,
                (_, Datum::Null) => acc,
                _ => arith(&acc, input, Op::Sub)?,
            },
            AggFunction::Product => match (&acc, input) {
                (Datum::Null, _) | (_, Datum::Null) => acc,
                _ => arith(&acc, input, Op::Div)?,
            },
            other => {
                self.value = acc;
                return Err(invalid_argument(format!(
                    "Aggregate function '{}' does not support retraction, If you allow this function to ignore \
                     retraction messages, you can configure 'fields.${{field_name}}.ignore-retract'='true'.",
                    other.name()
                )));
            }
        };
        Ok(())
    }
}

fn listagg(acc: Datum, input: &Datum, spec: &AggSpec) -> Datum {
    let blank = |d: &Datum| match d {
        Datum::Null => true,
        Datum::String(s) => s.trim().is_empty(),
        _ => false,
    };
    if blank(input) {
        return acc;
    }
    if blank(&acc) {
        return input.clone();
    }
    let (Datum::String(a), Datum::String(b)) = (&acc, input) else {
        return acc;
    };
    if !spec.distinct {
        return Datum::String(format!("{a}{}{b}", spec.delimiter));
    }
    let mut out = a.clone();
    let mut seen: Vec<String> = a
        .split(spec.delimiter.as_str())
        .map(str::to_string)
        .collect();
    for token in b.split(spec.delimiter.as_str()) {
        if token.trim().is_empty() || seen.iter().any(|s| s == token) {
            continue;
        }
        out.push_str(&spec.delimiter);
        out.push_str(token);
        seen.push(token.to_string());
    }
    Datum::String(out)
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

fn negate(d: &Datum) -> Result<Datum> {
    Ok(match d {
        Datum::Null => Datum::Null,
        Datum::TinyInt(v) => Datum::TinyInt(
            v.checked_neg()
                .ok_or_else(|| invalid_argument("byte overflow"))?,
        ),
        Datum::SmallInt(v) => Datum::SmallInt(
            v.checked_neg()
                .ok_or_else(|| invalid_argument("short overflow"))?,
        ),
        Datum::Int(v) => Datum::Int(
            v.checked_neg()
                .ok_or_else(|| invalid_argument("int overflow"))?,
        ),
        Datum::BigInt(v) => Datum::BigInt(
            v.checked_neg()
                .ok_or_else(|| invalid_argument("long overflow"))?,
        ),
        Datum::Float(v) => Datum::Float(-v),
        Datum::Double(v) => Datum::Double(-v),
        Datum::Decimal {
            unscaled,
            precision,
            scale,
        } => Datum::Decimal {
            unscaled: -unscaled,
            precision: *precision,
            scale: *scale,
        },
        other => return Err(invalid_argument(format!("cannot negate {other:?}"))),
    })
}

macro_rules! int_op {
    ($a:expr, $b:expr, $op:expr, $what:literal, $ctor:path) => {{
        let (a, b) = ($a, $b);
        let r = match $op {
            Op::Add => a.checked_add(b),
            Op::Sub => a.checked_sub(b),
            Op::Mul => a.checked_mul(b),
            Op::Div => {
                if b == 0 {
                    return Err(invalid_argument("/ by zero"));
                }
                a.checked_div(b)
            }
        };
        $ctor(r.ok_or_else(|| {
            invalid_argument(format!(concat!($what, " overflow: {} {:?} {}"), a, $op, b))
        })?)
    }};
}

fn arith(a: &Datum, b: &Datum, op: Op) -> Result<Datum> {
    Ok(match (a, b) {
        (Datum::TinyInt(x), Datum::TinyInt(y)) => int_op!(*x, *y, op, "byte", Datum::TinyInt),
        (Datum::SmallInt(x), Datum::SmallInt(y)) => int_op!(*x, *y, op, "short", Datum::SmallInt),
        (Datum::Int(x), Datum::Int(y)) => int_op!(*x, *y, op, "int", Datum::Int),
        (Datum::BigInt(x), Datum::BigInt(y)) => int_op!(*x, *y, op, "long", Datum::BigInt),
        (Datum::Float(x), Datum::Float(y)) => Datum::Float(match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            Op::Div => x / y,
        }),
        (Datum::Double(x), Datum::Double(y)) => Datum::Double(match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            Op::Div => x / y,
        }),
        (
            Datum::Decimal {
                unscaled: x,
                precision,
                scale,
            },
            Datum::Decimal { unscaled: y, .. },
        ) => {
            let pow = 10i128.pow(*scale as u32);
            let round_div = |n: i128, d: i128| -> Option<i128> {
                if d == 0 {
                    return None;
                }
                let q = n / d;
                let r = n % d;
                // HALF_UP: away from zero when the remainder is at least half.
                Some(if 2 * r.abs() >= d.abs() {
                    q + (n.signum() * d.signum())
                } else {
                    q
                })
            };
            let v = match op {
                Op::Add => x.checked_add(*y),
                Op::Sub => x.checked_sub(*y),
                Op::Mul => x.checked_mul(*y).and_then(|p| round_div(p, pow)),
                Op::Div => x.checked_mul(pow).and_then(|n| round_div(n, *y)),
            };
            let limit = 10i128.checked_pow(*precision as u32).unwrap_or(i128::MAX);
            match v {
                Some(v) if v.abs() < limit => Datum::Decimal {
                    unscaled: v,
                    precision: *precision,
                    scale: *scale,
                },
                // Java returns null when the result no longer fits the declared precision.
                _ => Datum::Null,
            }
        }
        _ => return Err(invalid_argument(format!("cannot combine {a:?} and {b:?}"))),
    })
}

/// The `aggregation` merge engine over one key's records (oldest first).
pub(super) fn merge(g: &super::GroupInput<'_>, config: &MergeConfig) -> Result<super::Merged> {
    let n = config.types.len();
    let mut states: Vec<AggState> = (0..n).map(|_| AggState::new(Datum::Null)).collect();
    let mut current_delete = false;
    for &r in g.rows {
        let values = g.values(r)?;
        let kind = g.kind(r);
        current_delete = config.remove_record_on_delete && kind == crate::spec::RowKind::Delete;
        if current_delete {
            for (i, v) in values.iter().enumerate() {
                if v.is_null() && !config.types[i].nullable {
                    return Err(invalid_argument(format!("Field {i} can not be null")));
                }
                states[i] = AggState::new(v.clone());
            }
            continue;
        }
        for (i, v) in values.iter().enumerate() {
            let spec = config.aggregators[i]
                .as_ref()
                .ok_or_else(|| internal("aggregation without a function"))?;
            if kind.is_retract() {
                states[i].retract(spec, v)?;
            } else {
                states[i].agg(spec, v)?;
            }
        }
    }
    let kind = if current_delete {
        crate::spec::RowKind::Delete
    } else {
        crate::spec::RowKind::Insert
    };
    let base = *g.rows.last().ok_or_else(|| internal("an empty group"))?;
    Ok(super::Merged::Built {
        base,
        kind,
        values: states.into_iter().map(|s| s.value).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(f: AggFunction) -> AggSpec {
        AggSpec {
            function: f,
            ignore_retract: false,
            delimiter: ",".into(),
            distinct: false,
        }
    }

    /// The folded value, or the error's message.
    fn fold(f: AggFunction, inputs: &[(Datum, bool)]) -> std::result::Result<Datum, String> {
        let s = spec(f);
        let mut st = AggState::new(Datum::Null);
        for (d, retract) in inputs {
            let r = if *retract {
                st.retract(&s, d)
            } else {
                st.agg(&s, d)
            };
            r.map_err(|e| e.to_string())?;
        }
        Ok(st.value)
    }

    #[test]
    fn aggregates_like_paimon() {
        use Datum::*;
        assert_eq!(
            fold(
                AggFunction::Sum,
                &[(BigInt(5), false), (Null, false), (BigInt(2), false)]
            ),
            Ok(BigInt(7))
        );
        assert_eq!(
            fold(AggFunction::Sum, &[(BigInt(5), false), (BigInt(5), true)]),
            Ok(BigInt(0))
        );
        assert_eq!(fold(AggFunction::Sum, &[(Int(3), true)]), Ok(Int(-3)));
        assert!(
            fold(AggFunction::Sum, &[(Int(i32::MAX), false), (Int(1), false)])
                .unwrap_err()
                .contains("overflow")
        );
        assert_eq!(
            fold(
                AggFunction::Max,
                &[(Int(1), false), (Int(9), false), (Null, false)]
            ),
            Ok(Int(9))
        );
        assert_eq!(
            fold(
                AggFunction::Min,
                &[(String("b".into()), false), (String("a".into()), false)]
            ),
            Ok(String("a".into()))
        );
        assert!(fold(AggFunction::Max, &[(Int(1), false), (Int(1), true)])
            .unwrap_err()
            .contains("does not support retraction"));
        assert_eq!(
            fold(
                AggFunction::LastNonNullValue,
                &[(Int(1), false), (Null, false)]
            ),
            Ok(Int(1))
        );
        assert_eq!(
            fold(AggFunction::LastValue, &[(Int(1), false), (Null, false)]),
            Ok(Null)
        );
        assert_eq!(
            fold(AggFunction::FirstValue, &[(Null, false), (Int(2), false)]),
            Ok(Null)
        );
        assert_eq!(
            fold(
                AggFunction::FirstNonNullValue,
                &[(Null, false), (Int(2), false), (Int(3), false)]
            ),
            Ok(Int(2))
        );
        assert_eq!(
            fold(
                AggFunction::ListAgg,
                &[
                    (String("a".into()), false),
                    (String(" ".into()), false),
                    (String("b".into()), false)
                ]
            ),
            Ok(String("a,b".into()))
        );
        assert_eq!(
            fold(
                AggFunction::BoolAnd,
                &[(Boolean(true), false), (Boolean(false), false)]
            ),
            Ok(Boolean(false))
        );
        assert_eq!(
            fold(
                AggFunction::BoolOr,
                &[
                    (Boolean(false), false),
                    (Null, false),
                    (Boolean(true), false)
                ]
            ),
            Ok(Boolean(true))
        );
        let dec = |v| Decimal {
            unscaled: v,
            precision: 10,
            scale: 2,
        };
        assert_eq!(
            fold(
                AggFunction::Product,
                &[(dec(150), false), (dec(250), false)]
            ),
            Ok(dec(375))
        );
        assert_eq!(
            fold(AggFunction::Product, &[(dec(375), false), (dec(250), true)]),
            Ok(dec(150))
        );
        let distinct = AggSpec {
            distinct: true,
            ..spec(AggFunction::ListAgg)
        };
        let mut st = AggState::new(Null);
        for v in ["a,b", "b,c", "a"] {
            st.agg(&distinct, &String(v.into())).unwrap();
        }
        assert_eq!(st.value, String("a,b,c".into()));
        assert!(AggFunction::parse("count")
            .unwrap_err()
            .to_string()
            .contains("sum"));
    }
}
