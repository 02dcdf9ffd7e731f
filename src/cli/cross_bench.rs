//! `tidelake bench --cross-partition`: what an upsert into a cross-partition table costs as the
//! table grows. For a quarter of `--rows` and for all of them, a table `id BIGINT, dt STRING,
//! v DOUBLE` keyed on `id` alone, partitioned by `dt` (16 partitions), `bucket` = -1, is loaded
//! through the cross-partition writer (`--batch` rows per commit), then takes timed commits of
//! `--batch` upserts of random existing keys, half of them moved to another partition. Printed:
//! each size's cost per upsert (median commit) and the ratio of the larger to the smaller; the
//! rows read back must be one per key.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, TableDefinition};

use super::bench::{BenchArgs, Rng};
use super::Result;

const PARTITIONS: u64 = 16;
/// Timed upsert commits per size.
const COMMITS: usize = 9;

fn batch(ids: &[i64], rng: &mut Rng, moved: impl Fn(&mut Rng) -> bool) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("dt", DataType::Utf8, false),
        Field::new("v", DataType::Float64, true),
    ]));
    let dts: Vec<String> = ids
        .iter()
        .map(|&id| {
            let home = id as u64 % PARTITIONS;
            let p = if moved(rng) {
                (home + 1 + rng.next() % (PARTITIONS - 1)) % PARTITIONS
            } else {
                home
            };
            format!("p{p:02}")
        })
        .collect();
    let values: Vec<f64> = ids.iter().map(|_| rng.next() as f64).collect();
    Ok(RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(dts)),
            Arc::new(Float64Array::from(values)),
        ],
    )?)
}

/// Loads `n` keys and times upsert commits; returns seconds per upsert (median commit).
async fn one_size(
    catalog: &Catalog,
    n: usize,
    per_commit: usize,
    options: &[(String, String)],
) -> Result<f64> {
    let mut opts: std::collections::BTreeMap<String, String> =
        [("bucket", "-1"), ("write-only", "true")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    opts.extend(options.iter().cloned());
    let table = catalog
        .create_table(
            &Identifier::new("bench", format!("cross_{n}")),
            &TableDefinition {
                columns: TableDefinition::parse_columns(
                    "id BIGINT NOT NULL, dt STRING NOT NULL, v DOUBLE",
                )?,
                primary_keys: vec!["id".into()],
                partition_keys: vec!["dt".into()],
                options: opts,
                ..Default::default()
            },
            false,
        )
        .await?;
    let mut rng = Rng(7);
    let ids: Vec<i64> = (0..n as i64).collect();
    let started = Instant::now();
    for chunk in ids.chunks(per_commit.max(500_000)) {
        let b = batch(chunk, &mut rng, |_| false)?;
        table
            .write_batches(&[b], WriteOptions::default(), None)
            .await?;
    }
    let load = started.elapsed().as_secs_f64();
    let mut times = Vec::new();
    for i in 0..=COMMITS {
        let keys: Vec<i64> = (0..per_commit)
            .map(|_| (rng.next() % n as u64) as i64)
            .collect();
        let b = batch(&keys, &mut rng, |r| r.next() % 2 == 0)?;
        let t = Instant::now();
        table
            .write_batches(&[b], WriteOptions::default(), None)
            .await?;
        // The first commit also syncs the index with the load's last commit: not timed.
        if i > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let rows: usize = table
        .read_all(SnapshotSelector::Latest, Some(&["id".to_string()]))
        .await?
        .iter()
        .map(|b| b.num_rows())
        .sum();
    if rows != n {
        return Err(format!("cross_{n}: {rows} rows read back, {n} keys written").into());
    }
    println!(
        "{n:>10} keys  load {load:>6.2} s  upsert commit (median of {COMMITS}) {:>7.1} ms  {:>6.2} µs/upsert",
        median * 1e3,
        median / per_commit as f64 * 1e6
    );
    Ok(median / per_commit as f64)
}

pub(crate) async fn run(args: &BenchArgs) -> Result<()> {
    let dir = args
        .dir
        .join(format!("tidelake-cross-{}", std::process::id()));
    let catalog = Catalog::open(dir.to_str().ok_or("bench dir is not UTF-8")?)?;
    println!(
        "cross-partition upserts: {} per commit, half moved to another partition",
        args.batch
    );
    let small = one_size(&catalog, args.rows / 4, args.batch, &args.options).await;
    let large = match &small {
        Ok(_) => one_size(&catalog, args.rows, args.batch, &args.options).await,
        Err(_) => Ok(0.0),
    };
    #[allow(clippy::disallowed_methods)]
    let _ = std::fs::remove_dir_all(&dir);
    let (small, large) = (small?, large?);
    println!(
        "cost per upsert at {} keys / at {} keys: {:.2}x (goal ≤ 1.3x)",
        args.rows,
        args.rows / 4,
        large / small
    );
    Ok(())
}
