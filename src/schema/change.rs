//! Schema evolution: Paimon's `SchemaChange`s applied to a `TableSchema`, producing the next
//! schema version. Pure: validation and the new schema only; [`super::SchemaManager::commit`]
//! writes it as `schema-(N+1)`.
//!
//! Field ids are the identity of a column: a rename keeps the id, an added column takes
//! `highestFieldId + 1`, a dropped id is never reused. Readers map old data files to the current
//! schema by these ids (`crate::table::evolution`).
//!
//! Refused, as Paimon refuses them: changes to primary-key or partition columns other than
//! comments, dropping every column, NOT NULL added columns, narrowing or lossy type changes,
//! NULL -> NOT NULL, and changing options that fix the physical layout (`bucket`,
//! `merge-engine`, ...).

use std::collections::BTreeMap;

use crate::error::{invalid, Result};
use crate::spec::types::TypeRoot;
use crate::spec::{DataField, DataType, TableSchema};

/// Where a column goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnMove {
    First,
    After(String),
    Before(String),
    Last,
}

/// One change of a table's schema (Paimon's `SchemaChange`).
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaChange {
    SetOption {
        key: String,
        value: String,
    },
    RemoveOption {
        key: String,
    },
    UpdateComment {
        comment: Option<String>,
    },
    AddColumn {
        name: String,
        data_type: DataType,
        comment: Option<String>,
        position: Option<ColumnMove>,
    },
    RenameColumn {
        name: String,
        new_name: String,
    },
    DropColumn {
        name: String,
    },
    UpdateColumnType {
        name: String,
        data_type: DataType,
    },
    UpdateColumnNullability {
        name: String,
        nullable: bool,
    },
    UpdateColumnComment {
        name: String,
        comment: Option<String>,
    },
    UpdateColumnPosition {
        name: String,
        position: ColumnMove,
    },
}

/// Options that fix how existing files are laid out or merged (Paimon's `IMMUTABLE_OPTIONS`,
/// plus `bucket`, whose rescaling tidelake does not support yet).
const IMMUTABLE_OPTIONS: &[&str] = &[
    "type",
    "bucket",
    "bucket-key",
    "bucket-function.type",
    "data-file.path-directory",
    "merge-engine",
    "sequence.snapshot-ordering",
    "aggregation.remove-record-on-delete",
    "partial-update.remove-record-on-delete",
    "partial-update.remove-record-on-sequence-group",
    "rowkind.field",
    "primary-key",
    "partition",
    "dynamic-bucket.initial-buckets",
    "force-lookup",
    "row-tracking.enabled",
    "data-evolution.enabled",
];

fn reserved(name: &str) -> bool {
    name.is_empty()
        || name.starts_with("_KEY_")
        || name.starts_with("_SEQUENCE_NUMBER")
        || name == "_VALUE_KIND"
        || name == "_row_kind"
}

/// Whether every value of `from` converts to `to` without loss: Paimon's implicit casts that keep
/// every value, and any value to a string. Paimon also accepts explicit casts (narrowing,
/// string -> number) unless `disable-explicit-type-casting`; they wrap or fail on read, so
/// tidelake refuses them.
pub fn is_widening(from: &DataType, to: &DataType) -> bool {
    use TypeRoot::*;
    if from.is_nested() || to.is_nested() {
        return false;
    }
    if matches!(to.root, VarChar(n) if n == crate::spec::types::MAX_LENGTH)
        && !matches!(from.root, Binary(_) | VarBinary(_))
    {
        return true;
    }
    let rank = |r: &TypeRoot| match r {
        TinyInt => Some(1),
        SmallInt => Some(2),
        Int => Some(3),
        BigInt => Some(4),
        _ => None,
    };
    match (&from.root, &to.root) {
        (a, b) if a == b => true,
        (a, b) if rank(a).is_some() && rank(b).is_some() => rank(a) <= rank(b),
        (TinyInt | SmallInt | Int, Float | Double) | (BigInt, Double) | (Float, Double) => true,
        (
            TinyInt | SmallInt | Int | BigInt,
            Decimal {
                precision: p,
                scale: s,
            },
        ) => {
            let digits = match &from.root {
                TinyInt => 3,
                SmallInt => 5,
                Int => 10,
                _ => 19,
            };
            (*p as i32 - *s as i32) >= digits
        }
        (
            Decimal {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s2 >= s1 && (*p2 as i32 - *s2 as i32) >= (*p1 as i32 - *s1 as i32),
        (Char(a) | VarChar(a), VarChar(b)) => b >= a,
        (Binary(a) | VarBinary(a), VarBinary(b)) => b >= a,
        (Timestamp(a), Timestamp(b)) => b >= a,
        (LocalZonedTimestamp(a), LocalZonedTimestamp(b)) => b >= a,
        (Time(a), Time(b)) => b >= a,
        (Date, Timestamp(_)) => true,
        _ => false,
    }
}

/// Applies `changes` in order to `schema` and returns the next version (id + 1).
pub fn apply(
    schema: &TableSchema,
    table: &str,
    changes: &[SchemaChange],
    now_millis: i64,
) -> Result<TableSchema> {
    let mut next = schema.clone();
    next.id = schema.id + 1;
    next.time_millis = now_millis;
    for change in changes {
        apply_one(&mut next, table, change)?;
    }
    // Whatever the schema now implies (keys, buckets, merge-engine options) must hold.
    super::layout::TableLayout::new(std::sync::Arc::new(next.clone()))?;
    Ok(next)
}

fn index_of(schema: &TableSchema, table: &str, name: &str) -> Result<usize> {
    match schema.field_index(name) {
        Some(i) => Ok(i),
        None => invalid!("Column {name} does not exist in the {table} table."),
    }
}

fn is_partition(s: &TableSchema, name: &str) -> bool {
    s.partition_keys.iter().any(|k| k == name)
}

fn is_primary(s: &TableSchema, name: &str) -> bool {
    s.primary_keys.iter().any(|k| k == name)
}

fn place(fields: &mut Vec<DataField>, field: DataField, position: &ColumnMove) -> Result<()> {
    let at = match position {
        ColumnMove::First => 0,
        ColumnMove::Last => fields.len(),
        ColumnMove::After(other) | ColumnMove::Before(other) => {
            let Some(i) = fields.iter().position(|f| f.name == *other) else {
                return invalid!("Reference field name not found: {other}");
            };
            if matches!(position, ColumnMove::After(_)) {
                i + 1
            } else {
                i
            }
        }
    };
    fields.insert(at, field);
    Ok(())
}

/// Paimon's SchemaManager rule: deletion vectors are switched on or off only with
/// `deletion-vectors.modifiable` (the files already written were merged for the other mode).
fn check_dv_mode(s: &TableSchema, key: &str, value: Option<&str>) -> Result<()> {
    use crate::spec::options::{DELETION_VECTORS, DV_MODIFIABLE};
    if key != DELETION_VECTORS {
        return Ok(());
    }
    let on = |v: Option<&str>| v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let (from, to) = (on(s.options.get(key).map(String::as_str)), on(value));
    if from != to && !on(s.options.get(DV_MODIFIABLE).map(String::as_str)) {
        return invalid!(
            "Cannot change deletion vectors mode from {from} to {to}. If modifying table deletion-vectors mode without full-compaction, this may result in data duplication. If you are confident, you can set table option '{DV_MODIFIABLE}' = 'true' to allow deletion vectors modification."
        );
    }
    Ok(())
}

fn apply_one(s: &mut TableSchema, table: &str, change: &SchemaChange) -> Result<()> {
    match change {
        SchemaChange::SetOption { key, value } => {
            if IMMUTABLE_OPTIONS.contains(&key.as_str()) && s.options.get(key) != Some(value) {
                return invalid!("Change '{key}' is not supported yet.");
            }
            check_dv_mode(s, key, Some(value))?;
            if matches!(key.as_str(), "ignore-delete" | "ignore-update-before")
                && s.options
                    .get(key)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"))
                && !value.eq_ignore_ascii_case("true")
            {
                return invalid!("Cannot change {key} from true to false.");
            }
            s.options.insert(key.clone(), value.clone());
        }
        SchemaChange::RemoveOption { key } => {
            if IMMUTABLE_OPTIONS.contains(&key.as_str()) && s.options.contains_key(key) {
                return invalid!("Change '{key}' is not supported yet.");
            }
            check_dv_mode(s, key, None)?;
            s.options.remove(key);
        }
        SchemaChange::UpdateComment { comment } => s.comment = comment.clone(),
        SchemaChange::AddColumn {
            name,
            data_type,
            comment,
            position,
        } => {
            if reserved(name) {
                return invalid!("invalid column name '{name}' (reserved or empty)");
            }
            if s.field(name).is_some() {
                return invalid!("Column {name} already exists in the {table} table.");
            }
            if !data_type.nullable {
                return invalid!("Column {name} cannot specify NOT NULL in the {table} table.");
            }
            s.highest_field_id += 1;
            let id = s.highest_field_id;
            let mut data_type = data_type.clone();
            data_type.reassign_nested_ids(&mut s.highest_field_id);
            let field = DataField {
                id,
                name: name.clone(),
                data_type,
                description: comment.clone(),
            };
            place(
                &mut s.fields,
                field,
                position.as_ref().unwrap_or(&ColumnMove::Last),
            )?;
        }
        SchemaChange::RenameColumn { name, new_name } => {
            let i = index_of(s, table, name)?;
            if is_partition(s, name) {
                return invalid!("Cannot rename partition column: [{name}]");
            }
            if reserved(new_name) {
                return invalid!("invalid column name '{new_name}' (reserved or empty)");
            }
            if s.field(new_name).is_some() {
                return invalid!("Column {new_name} already exists in the {table} table.");
            }
            // A primary key may be renamed: its field id (and so its data) stays.
            for k in s.primary_keys.iter_mut().filter(|k| *k == name) {
                *k = new_name.clone();
            }
            rename_in_options(&mut s.options, name, new_name);
            s.fields[i].name = new_name.clone();
        }
        SchemaChange::DropColumn { name } => {
            let i = index_of(s, table, name)?;
            if is_partition(s, name) || is_primary(s, name) {
                return invalid!("Cannot drop partition key or primary key: [{name}]");
            }
            if s.fields.len() == 1 {
                return invalid!("Cannot drop all fields in table");
            }
            if options_name_column(&s.options, name) {
                return invalid!(
                    "Cannot drop column {name} of the {table} table: options 'sequence.field', 'rowkind.field', 'bucket-key' or a sequence group name it"
                );
            }
            // Per-column options of the dropped column go with it.
            let prefix = format!("fields.{name}.");
            s.options.retain(|k, _| !k.starts_with(&prefix));
            s.fields.remove(i);
        }
        SchemaChange::UpdateColumnType { name, data_type } => {
            let i = index_of(s, table, name)?;
            if is_partition(s, name) {
                return invalid!("Cannot update partition column: [{name}]");
            }
            if is_primary(s, name) {
                return invalid!("Cannot update primary key");
            }
            let old = s.fields[i].data_type.clone();
            let new = data_type.clone().with_nullable(old.nullable);
            if old.is_nested() || new.is_nested() {
                return invalid!(
                    "Column {name}[{old}]: changing the type of a nested column is not supported yet"
                );
            }
            if !is_widening(&old, &new) {
                return invalid!(
                    "Column type {name}[{old}] cannot be converted to {new} without losing information."
                );
            }
            s.fields[i].data_type = new;
        }
        SchemaChange::UpdateColumnNullability { name, nullable } => {
            let i = index_of(s, table, name)?;
            let current = s.fields[i].data_type.nullable;
            if *nullable && is_primary(s, name) {
                return invalid!("Cannot change nullability of primary key");
            }
            if !nullable && current {
                return invalid!(
                    "Cannot update column type from nullable to non nullable for {name}. Existing rows may hold NULL."
                );
            }
            s.fields[i].data_type = s.fields[i].data_type.clone().with_nullable(*nullable);
        }
        SchemaChange::UpdateColumnComment { name, comment } => {
            let i = index_of(s, table, name)?;
            s.fields[i].description = comment.clone();
        }
        SchemaChange::UpdateColumnPosition { name, position } => {
            if s.field(name).is_none() {
                return invalid!("Field name not found: {name}");
            }
            if matches!(position, ColumnMove::After(o) | ColumnMove::Before(o) if o == name) {
                return invalid!("Cannot move itself for column {name}");
            }
            let i = index_of(s, table, name)?;
            let field = s.fields.remove(i);
            place(&mut s.fields, field, position)?;
        }
    }
    Ok(())
}

/// Option keys that name a column (`fields.<col>.*`, `sequence.field`, ...).
fn options_name_column(options: &BTreeMap<String, String>, column: &str) -> bool {
    let prefix = format!("fields.{column}.");
    options.keys().any(|k| k.starts_with(&prefix))
        || options.iter().any(|(k, v)| {
            matches!(
                k.as_str(),
                "sequence.field" | "rowkind.field" | "bucket-key"
            ) && v.split(',').any(|c| c.trim() == column)
        })
        || options.iter().any(|(k, v)| {
            k.ends_with(".sequence-group") && v.split(',').any(|c| c.trim() == column)
        })
}

/// Options keyed by a column (`fields.<col>.aggregate-function`, ...) follow a rename.
fn rename_in_options(options: &mut BTreeMap<String, String>, old: &str, new: &str) {
    let prefix = format!("fields.{old}.");
    let moved: Vec<(String, String)> = options
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in moved {
        options.remove(&k);
        options.insert(format!("fields.{new}.{}", &k[prefix.len()..]), v);
    }
    for (k, v) in options.iter_mut() {
        let lists_columns = matches!(
            k.as_str(),
            "sequence.field" | "rowkind.field" | "bucket-key"
        ) || k.ends_with(".sequence-group");
        if lists_columns {
            *v = v
                .split(',')
                .map(|c| if c.trim() == old { new } else { c.trim() })
                .collect::<Vec<_>>()
                .join(",");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        serde_json::from_str(
            r#"{"version":3,"id":0,"fields":[{"id":0,"name":"id","type":"BIGINT NOT NULL"},
            {"id":1,"name":"v","type":"INT"},{"id":2,"name":"dt","type":"STRING NOT NULL"}],
            "highestFieldId":2,"partitionKeys":["dt"],"primaryKeys":["id","dt"],
            "options":{"bucket":"2","fields.v.aggregate-function":"sum","merge-engine":"aggregation"},"timeMillis":1}"#,
        )
        .unwrap()
    }

    fn ty(s: &str) -> DataType {
        s.parse().unwrap()
    }

    #[test]
    fn deletion_vectors_are_switched_only_when_modifiable() {
        let set = |k: &str, v: &str| SchemaChange::SetOption {
            key: k.into(),
            value: v.into(),
        };
        let s = schema();
        let mut on = s.clone();
        let e = apply_one(&mut on, "db.t", &set("deletion-vectors.enabled", "true")).unwrap_err();
        assert!(
            e.to_string()
                .contains("Cannot change deletion vectors mode from false to true"),
            "{e}"
        );
        apply_one(&mut on, "db.t", &set("deletion-vectors.enabled", "false")).unwrap();
        apply_one(&mut on, "db.t", &set("deletion-vectors.modifiable", "true")).unwrap();
        apply_one(&mut on, "db.t", &set("deletion-vectors.enabled", "true")).unwrap();
        let mut off = s;
        off.options
            .insert("deletion-vectors.enabled".into(), "true".into());
        let remove = SchemaChange::RemoveOption {
            key: "deletion-vectors.enabled".into(),
        };
        assert!(apply_one(&mut off, "db.t", &remove).is_err());
    }

    #[test]
    fn field_ids_survive_renames_and_new_columns_take_fresh_ids() {
        let s = schema();
        let next = apply(
            &s,
            "db.t",
            &[
                SchemaChange::RenameColumn {
                    name: "v".into(),
                    new_name: "total".into(),
                },
                SchemaChange::AddColumn {
                    name: "note".into(),
                    data_type: ty("STRING"),
                    comment: Some("free text".into()),
                    position: Some(ColumnMove::First),
                },
                SchemaChange::UpdateColumnType {
                    name: "total".into(),
                    data_type: ty("BIGINT"),
                },
            ],
            5,
        )
        .unwrap();
        assert_eq!(next.id, 1);
        let names: Vec<(&str, i32)> = next
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.id))
            .collect();
        assert_eq!(names, vec![("note", 3), ("id", 0), ("total", 1), ("dt", 2)]);
        assert_eq!(next.highest_field_id, 3);
        assert_eq!(next.fields[2].data_type, ty("BIGINT"));
        assert_eq!(
            next.options
                .get("fields.total.aggregate-function")
                .map(String::as_str),
            Some("sum")
        );
        // Dropping and re-adding a name gives a new id.
        let again = apply(
            &next,
            "db.t",
            &[
                SchemaChange::DropColumn {
                    name: "note".into(),
                },
                SchemaChange::AddColumn {
                    name: "note".into(),
                    data_type: ty("STRING"),
                    comment: None,
                    position: None,
                },
            ],
            6,
        )
        .unwrap();
        assert_eq!(again.field("note").unwrap().id, 4);
    }

    #[test]
    fn refuses_what_paimon_refuses() {
        let s = schema();
        let bad = |c: SchemaChange| apply(&s, "db.t", &[c], 0).unwrap_err().to_string();
        assert_eq!(
            bad(SchemaChange::DropColumn { name: "id".into() }),
            "Cannot drop partition key or primary key: [id]"
        );
        assert_eq!(
            bad(SchemaChange::RenameColumn {
                name: "dt".into(),
                new_name: "day".into()
            }),
            "Cannot rename partition column: [dt]"
        );
        assert_eq!(
            bad(SchemaChange::UpdateColumnType {
                name: "v".into(),
                data_type: ty("SMALLINT")
            }),
            "Column type v[INT] cannot be converted to SMALLINT without losing information."
        );
        assert_eq!(
            bad(SchemaChange::UpdateColumnType {
                name: "id".into(),
                data_type: ty("DECIMAL(30, 0)")
            }),
            "Cannot update primary key"
        );
        assert_eq!(
            bad(SchemaChange::AddColumn {
                name: "x".into(),
                data_type: ty("INT NOT NULL"),
                comment: None,
                position: None
            }),
            "Column x cannot specify NOT NULL in the db.t table."
        );
        assert_eq!(
            bad(SchemaChange::SetOption {
                key: "merge-engine".into(),
                value: "deduplicate".into()
            }),
            "Change 'merge-engine' is not supported yet."
        );
        assert_eq!(
            bad(SchemaChange::RenameColumn {
                name: "nope".into(),
                new_name: "x".into()
            }),
            "Column nope does not exist in the db.t table."
        );
        assert_eq!(
            bad(SchemaChange::UpdateColumnNullability {
                name: "id".into(),
                nullable: true
            }),
            "Cannot change nullability of primary key"
        );
        // A primary key may be renamed; its id stays.
        let renamed = apply(
            &s,
            "db.t",
            &[SchemaChange::RenameColumn {
                name: "id".into(),
                new_name: "key".into(),
            }],
            0,
        )
        .unwrap();
        assert_eq!(
            renamed.primary_keys,
            vec!["key".to_string(), "dt".to_string()]
        );
        assert_eq!(renamed.field("key").unwrap().id, 0);
    }

    #[test]
    fn widening_rules() {
        assert!(is_widening(&ty("INT"), &ty("BIGINT")));
        assert!(is_widening(&ty("FLOAT"), &ty("DOUBLE")));
        assert!(is_widening(&ty("DECIMAL(10, 2)"), &ty("DECIMAL(12, 2)")));
        assert!(is_widening(&ty("INT"), &ty("DECIMAL(12, 2)")));
        assert!(is_widening(&ty("VARCHAR(10)"), &ty("STRING")));
        assert!(!is_widening(&ty("BIGINT"), &ty("INT")));
        assert!(!is_widening(&ty("DECIMAL(10, 2)"), &ty("DECIMAL(10, 3)")));
        assert!(!is_widening(&ty("STRING"), &ty("INT")));
        assert!(is_widening(&ty("INT"), &ty("STRING")));
        assert!(!is_widening(&ty("BIGINT"), &ty("FLOAT")));
    }
}
