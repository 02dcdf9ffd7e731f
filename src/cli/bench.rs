//! `tidelake bench`: workload W (see `../shared/bench/README.md`) on tidelake and, in the same
//! command, on pypaimon 2.1, with the ratios.
//!
//! Phases on tidelake: append ingest of N rows into an append table; N inserts then U upserts
//! (half existing keys, half new) into a primary-key table `id BIGINT, k BIGINT, v DOUBLE,
//! s STRING`, committed every `batch` rows; a full scan checked against the expected count and
//! sum. pypaimon runs `peers_w.py --engine paimon` (insert, upsert, read) and
//! `bench/pypaimon_append.py` (append ingest) on the same sizes.
//!
//! `--point-queries <URL>` runs concurrent point-query clients against a running server instead
//! ([`super::point_bench`]).
//!
//! `--cross-partition` measures instead the cost of an upsert into a cross-partition table as it
//! grows ([`super::cross_bench`]).
//!
//! `--deletion-vectors` measures instead the full scan of a deletion-vector table beside
//! merge-on-read of the same rows (and what each cost to write).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Float64Type, Schema};
use tidelake::table::{SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, TableDefinition};

use super::Result;

/// `KEY=VALUE` of `--option`.
fn parse_option(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    #[arg(long, default_value_t = 5_000_000)]
    pub(super) rows: usize,
    /// Upserts (default rows / 5).
    #[arg(long)]
    upserts: Option<usize>,
    #[arg(long, default_value_t = 100_000)]
    pub(super) batch: usize,
    #[arg(long, default_value_t = 2)]
    buckets: usize,
    /// Where the tables are written (deleted afterwards).
    #[arg(long, default_value = "/tmp/tidelake-bench")]
    pub(super) dir: PathBuf,
    /// Python interpreter with pypaimon 2.1 (scripts/setup-python.sh makes one).
    #[arg(long, default_value = ".venv/bin/python")]
    python: String,
    /// The peers' script of workload W.
    #[arg(long, default_value = "../shared/bench/peers_w.py")]
    peers_script: PathBuf,
    /// Skip the pypaimon side.
    #[arg(long)]
    no_peers: bool,
    /// Create the primary-key table with `write-only` = true (no compaction while writing, as
    /// pypaimon), instead of one compaction round per commit.
    #[arg(long)]
    write_only: bool,
    /// Instead of workload W: the same inserts and upserts into a deletion-vector table and a
    /// merge-on-read one, then full scans of both (the scan of a deletion-vector table reads
    /// files without merging; its writes pay for that with a lookup at each commit).
    #[arg(long)]
    deletion_vectors: bool,
    /// Write the primary-key table's inserts and upserts as one long-lived stream (one writer,
    /// a commit every `batch` rows, compaction in the background as a CDC stream does; the
    /// last commit waits for a compaction round and is timed) instead of one batch job per
    /// commit that waits for its compaction round.
    #[arg(long)]
    streaming: bool,
    /// A table option of the primary-key table, as KEY=VALUE (repeatable), e.g.
    /// `--option changelog-producer=lookup` or `--option deletion-vectors.enabled=true`.
    #[arg(long = "option", value_name = "KEY=VALUE", value_parser = parse_option)]
    pub(super) options: Vec<(String, String)>,
    /// Instead of workload W: the cost of an upsert commit into a cross-partition table
    /// (`bucket` = -1, key without the partition) at a quarter of `--rows` keys and at `--rows`
    /// keys, `--batch` upserts per commit, half of them moving their key to another partition.
    #[arg(long)]
    pub(crate) cross_partition: bool,
    #[command(flatten)]
    point: super::point_bench::PointBenchArgs,
}

/// splitmix64: a small deterministic generator, enough for benchmark data.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

fn make_batch(rng: &mut Rng, ids: &[i64], truth: &mut [f64]) -> Result<RecordBatch> {
    let v: Vec<f64> = ids.iter().map(|_| rng.unit()).collect();
    for (id, x) in ids.iter().zip(&v) {
        truth[*id as usize] = *x;
    }
    let k = Int64Array::from_iter_values(ids.iter().map(|_| rng.below(1_000_000) as i64));
    let s = StringArray::from_iter_values(
        ids.iter()
            .map(|_| format!("s-{:014}", rng.below(10_000_000_000_000))),
    );
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(k),
            Arc::new(Float64Array::from(v)),
            Arc::new(s),
        ],
    )?)
}

/// Upsert batches per cost probe.
const PROBE_BATCHES: usize = 5;

/// A batch of `m` upserts: half on existing keys (any key below `next_new`), half new keys.
/// Returns the batch and the seconds spent generating it.
fn upsert_batch(
    rng: &mut Rng,
    next_new: &mut i64,
    m: usize,
    truth: &mut [f64],
) -> Result<(RecordBatch, f64)> {
    let g = Instant::now();
    let nu = m / 2;
    let mut ids: Vec<i64> = Vec::with_capacity(m);
    let mut seen = std::collections::HashSet::with_capacity(nu);
    while ids.len() < nu {
        let id = rng.below(*next_new as u64) as i64;
        if seen.insert(id) {
            ids.push(id);
        }
    }
    ids.extend(*next_new..*next_new + (m - nu) as i64);
    *next_new += (m - nu) as i64;
    for i in (1..ids.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        ids.swap(i, j);
    }
    let b = make_batch(rng, &ids, truth)?;
    Ok((b, g.elapsed().as_secs_f64()))
}

fn emit(
    engine: &str,
    phase: &str,
    fields: &[(&str, serde_json::Value)],
) -> BTreeMap<String, serde_json::Value> {
    let mut m = BTreeMap::new();
    m.insert("engine".to_string(), serde_json::json!(engine));
    m.insert("phase".to_string(), serde_json::json!(phase));
    for (k, v) in fields {
        m.insert(k.to_string(), v.clone());
    }
    println!("{}", serde_json::to_string(&m).unwrap_or_default());
    m
}

/// How workload W's primary-key writes are committed: one batch job per commit (which waits for
/// its compaction round), or one long-lived writer committing every batch (`--streaming`).
enum PkWriter {
    Jobs(tidelake::Table),
    Stream {
        write: Box<tidelake::table::write::TableWrite>,
        commit: tidelake::table::commit::TableCommit,
        next: i64,
    },
}

impl PkWriter {
    fn new(table: &tidelake::Table, streaming: bool) -> Result<Self> {
        Ok(if streaming {
            Self::Stream {
                write: Box::new(table.new_write(WriteOptions::default())?),
                commit: table.new_commit("bench-stream"),
                next: 1,
            }
        } else {
            Self::Jobs(table.clone())
        })
    }

    /// Writes and commits `b`.
    async fn commit(&mut self, b: RecordBatch) -> Result<()> {
        match self {
            Self::Jobs(t) => {
                t.write_batches(&[b], WriteOptions::default(), None).await?;
            }
            Self::Stream {
                write,
                commit,
                next,
            } => {
                write.write(&b).await?;
                let messages = write.prepare_commit().await?;
                commit.commit(messages, *next, None).await?;
                *next += 1;
            }
        }
        Ok(())
    }

    /// A stream's last commit waits for a compaction round (what the background was still doing
    /// is part of the cost); batch jobs already did.
    async fn settle(&mut self) -> Result<()> {
        if let Self::Stream {
            write,
            commit,
            next,
        } = self
        {
            write.set_wait_compaction(true);
            let messages = write.prepare_commit().await?;
            commit.commit(messages, *next, None).await?;
            *next += 1;
            write.set_wait_compaction(false);
        }
        Ok(())
    }

    async fn close(self) -> Result<()> {
        if let Self::Stream { write, .. } = self {
            write.close().await?;
        }
        Ok(())
    }
}

/// The primary-key table `bench.<name>` of workload W (`id BIGINT, k BIGINT, v DOUBLE, s STRING`).
/// Reads of `id` and `v` of the whole table: a scan of tens of milliseconds moves by a third from
/// one run to the next on a shared machine (a compacted read of 6M rows, 10 ms, by half), so the
/// median wall time of [`READS`] reads is reported (the peers' scripts read once).
const READS: usize = 15;

/// The median wall time of [`READS`] full reads of `table`, and the rows of the last.
async fn median_read(table: &tidelake::table::Table) -> Result<(f64, Vec<RecordBatch>)> {
    let mut walls = Vec::with_capacity(READS);
    let mut batches = Vec::new();
    for _ in 0..READS {
        let t0 = Instant::now();
        batches = table
            .read_all(
                SnapshotSelector::Latest,
                Some(&["id".to_string(), "v".to_string()]),
            )
            .await?;
        walls.push(t0.elapsed().as_secs_f64());
    }
    walls.sort_by(f64::total_cmp);
    Ok((walls[READS / 2], batches))
}

async fn pk_table(
    catalog: &Catalog,
    name: &str,
    options: BTreeMap<String, String>,
) -> Result<tidelake::Table> {
    Ok(catalog
        .create_table(
            &Identifier::new("bench", name),
            &TableDefinition {
                columns: TableDefinition::parse_columns(
                    "id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING",
                )?,
                primary_keys: vec!["id".into()],
                options,
                ..Default::default()
            },
            false,
        )
        .await?)
}

/// Writes `n` inserts and `u` upserts (half existing keys) into `table`, commit by commit;
/// returns the write seconds (generation excluded) and the rows every key holds now.
async fn fill(
    table: &tidelake::Table,
    n: usize,
    u: usize,
    batch: usize,
    truth: &mut [f64],
) -> Result<(f64, i64)> {
    let mut rng = Rng(7);
    let mut perm: Vec<i64> = (0..n as i64).collect();
    for i in (1..perm.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    let mut secs = 0f64;
    for chunk in perm.chunks(batch) {
        let b = make_batch(&mut rng, chunk, truth)?;
        let t0 = Instant::now();
        table
            .write_batches(&[b], WriteOptions::default(), None)
            .await?;
        secs += t0.elapsed().as_secs_f64();
    }
    let (mut next_new, mut done) = (n as i64, 0usize);
    while done < u {
        let m = batch.min(u - done);
        let (b, _) = upsert_batch(&mut rng, &mut next_new, m, truth)?;
        let t0 = Instant::now();
        table
            .write_batches(&[b], WriteOptions::default(), None)
            .await?;
        secs += t0.elapsed().as_secs_f64();
        done += m;
    }
    Ok((secs, next_new))
}

/// `tidelake bench --deletion-vectors`: full scans of a deletion-vector table beside
/// merge-on-read of the same rows, with what each cost to write.
async fn deletion_vector_scans(args: &BenchArgs) -> Result<()> {
    let (n, u) = (args.rows, args.upserts.unwrap_or(args.rows / 5));
    let dir = args.dir.join(format!("tidelake-dv-{}", std::process::id()));
    let catalog = Catalog::open(dir.to_str().ok_or("bench dir is not UTF-8")?)?;
    let mut scans: BTreeMap<&str, f64> = BTreeMap::new();
    let mut failed = None;
    for (name, dv) in [("merge_on_read", false), ("deletion_vectors", true)] {
        let mut opts = BTreeMap::new();
        opts.insert("bucket".to_string(), args.buckets.to_string());
        opts.insert("deletion-vectors.enabled".to_string(), dv.to_string());
        let table = pk_table(&catalog, name, opts).await?;
        let mut truth = vec![0f64; n + u + 1];
        let (write_s, keys) = fill(&table, n, u, args.batch, &mut truth).await?;
        let plan = table.new_scan().all_levels().plan().await?;
        let files: Vec<i32> = plan
            .splits
            .iter()
            .flat_map(|s| s.files.iter().map(|f| f.level))
            .collect();
        // The best of three scans (the machine is shared).
        let mut best = f64::MAX;
        let (mut count, mut sum) = (0usize, 0f64);
        for _ in 0..3 {
            let t0 = Instant::now();
            let batches = table
                .read_all(
                    SnapshotSelector::Latest,
                    Some(&["id".to_string(), "v".to_string(), "s".to_string()]),
                )
                .await?;
            best = best.min(t0.elapsed().as_secs_f64());
            count = batches.iter().map(|b| b.num_rows()).sum();
            sum = batches
                .iter()
                .map(|b| {
                    arrow::compute::sum(b.column(1).as_primitive::<Float64Type>()).unwrap_or(0.0)
                })
                .sum();
        }
        let expected: f64 = truth[..keys as usize].iter().sum();
        let ok = count == keys as usize && (sum - expected).abs() < 1e-6 * expected.abs().max(1.0);
        if !ok {
            failed = Some(format!("{name}: read {count} rows, expected {keys}"));
        }
        scans.insert(name, count as f64 / best);
        emit(
            "tidelake",
            &format!("scan_{name}"),
            &[
                ("rows", count.into()),
                ("scan_s", best.into()),
                ("rows_per_s", (count as f64 / best).round().into()),
                ("write_s", write_s.into()),
                (
                    "written_rows_per_s",
                    (((n + u) as f64) / write_s).round().into(),
                ),
                ("files", files.len().into()),
                (
                    "level0_files",
                    files.iter().filter(|l| **l == 0).count().into(),
                ),
                ("ok", ok.into()),
            ],
        );
    }
    catalog.io().delete_dir("").await.ok();
    if let Some(e) = failed {
        return Err(e.into());
    }
    if let (Some(dv), Some(mor)) = (scans.get("deletion_vectors"), scans.get("merge_on_read")) {
        println!();
        println!(
            "full scan: deletion vectors {dv:.0} rows/s, merge-on-read {mor:.0} rows/s: {:.2}x",
            dv / mor
        );
    }
    Ok(())
}

pub(crate) async fn run(args: &BenchArgs) -> Result<()> {
    if args.point.url.is_some() {
        return super::point_bench::run(&args.point).await;
    }
    if args.deletion_vectors {
        return deletion_vector_scans(args).await;
    }
    let n = args.rows;
    let u = args.upserts.unwrap_or(n / 5);
    let dir = args.dir.join(format!("tidelake-{}", std::process::id()));
    let catalog = Catalog::open(dir.to_str().ok_or("bench dir is not UTF-8")?)?;
    let mut ours: BTreeMap<String, f64> = BTreeMap::new();

    // ---- append ingest ----
    let append = catalog
        .create_table(
            &Identifier::new("bench", "append_w"),
            &TableDefinition {
                columns: TableDefinition::parse_columns(
                    "id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING",
                )?,
                ..Default::default()
            },
            false,
        )
        .await?;
    let mut rng = Rng(42);
    let mut truth = vec![0f64; n + u + 2 * PROBE_BATCHES * args.batch];
    let ids: Vec<i64> = (0..n as i64).collect();
    let (mut gen, t0) = (0f64, Instant::now());
    for chunk in ids.chunks(args.batch) {
        let g = Instant::now();
        let b = make_batch(&mut rng, chunk, &mut truth)?;
        gen += g.elapsed().as_secs_f64();
        append
            .write_batches(&[b], WriteOptions::default(), None)
            .await?;
    }
    let wall = t0.elapsed().as_secs_f64() - gen;
    ours.insert("append".into(), n as f64 / wall);
    emit(
        "tidelake",
        "append",
        &[
            ("rows", n.into()),
            ("wall_s", wall.into()),
            ("rows_per_s", (n as f64 / wall).round().into()),
        ],
    );

    // ---- primary-key insert ----
    let mut opts = BTreeMap::new();
    opts.insert("bucket".to_string(), args.buckets.to_string());
    if args.write_only {
        opts.insert("write-only".to_string(), "true".to_string());
    }
    opts.extend(args.options.iter().cloned());
    let pk = pk_table(&catalog, "pk_w", opts).await?;
    let mut perm: Vec<i64> = (0..n as i64).collect();
    for i in (1..perm.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    let mut next_new = n as i64;
    let mut writer = PkWriter::new(&pk, args.streaming)?;
    let (mut gen, t0) = (0f64, Instant::now());
    let mut inserted = 0usize;
    let mut probes: Vec<(usize, f64)> = Vec::new();
    for chunk in perm.chunks(args.batch) {
        let g = Instant::now();
        let b = make_batch(&mut rng, chunk, &mut truth)?;
        gen += g.elapsed().as_secs_f64();
        writer.commit(b).await?;
        inserted += chunk.len();
        // Cost per upsert as the table grows: probe at 1/5 and 4/5 of the inserts.
        for mark in [n / 5, 4 * n / 5] {
            if inserted >= mark && inserted - chunk.len() < mark {
                let p0 = Instant::now();
                let mut secs = 0f64;
                for _ in 0..PROBE_BATCHES {
                    let (b, _) = upsert_batch(&mut rng, &mut next_new, args.batch, &mut truth)?;
                    let w0 = Instant::now();
                    writer.commit(b).await?;
                    secs += w0.elapsed().as_secs_f64();
                }
                probes.push((inserted, secs / (PROBE_BATCHES * args.batch) as f64 * 1e6));
                // Probes are measured on their own, not as inserts.
                gen += p0.elapsed().as_secs_f64();
            }
        }
    }
    writer.settle().await?;
    let wall = t0.elapsed().as_secs_f64() - gen;
    ours.insert("insert".into(), n as f64 / wall);
    for (existing, us) in &probes {
        emit(
            "tidelake",
            "upsert_cost",
            &[
                ("existing_rows", (*existing).into()),
                ("us_per_upsert", (*us).into()),
            ],
        );
    }
    emit(
        "tidelake",
        "insert",
        &[
            ("rows", n.into()),
            ("wall_s", wall.into()),
            ("rows_per_s", (n as f64 / wall).round().into()),
        ],
    );

    // ---- upserts: half existing keys, half new ----
    let (mut gen, t0, mut done) = (0f64, Instant::now(), 0usize);
    while done < u {
        let m = args.batch.min(u - done);
        let (b, g) = upsert_batch(&mut rng, &mut next_new, m, &mut truth)?;
        gen += g;
        writer.commit(b).await?;
        done += m;
    }
    writer.settle().await?;
    writer.close().await?;
    let wall = t0.elapsed().as_secs_f64() - gen;
    ours.insert("upsert".into(), u as f64 / wall);
    emit(
        "tidelake",
        "upsert",
        &[
            ("rows", u.into()),
            ("wall_s", wall.into()),
            ("rows_per_s", (u as f64 / wall).round().into()),
        ],
    );

    // ---- full scan ----
    let (wall, batches) = median_read(&pk).await?;
    let count: usize = batches.iter().map(|b| b.num_rows()).sum();
    let sum: f64 = batches
        .iter()
        .map(|b| arrow::compute::sum(b.column(1).as_primitive::<Float64Type>()).unwrap_or(0.0))
        .sum();
    let expected_sum: f64 = truth[..next_new as usize].iter().sum();
    let count_ok = count == next_new as usize;
    let sum_ok = (sum - expected_sum).abs() < 1e-6 * expected_sum.abs().max(1.0);
    ours.insert("read".into(), count as f64 / wall);
    emit(
        "tidelake",
        "read",
        &[
            ("rows", count.into()),
            ("wall_s", wall.into()),
            ("rows_per_s", (count as f64 / wall).round().into()),
            ("count_ok", count_ok.into()),
            ("sum_ok", sum_ok.into()),
        ],
    );
    // ---- LSM shape, write amplification, full compaction ----
    let plan = pk.new_scan().all_levels().plan().await?;
    let runs: Vec<usize> = plan
        .splits
        .iter()
        .map(|s| tidelake::lsm::levels::sorted_runs(&s.files).len())
        .collect();
    let (mut ingested, mut rewritten) = (0i64, 0i64);
    let sm = pk.snapshot_manager();
    for id in sm.list_ids().await? {
        let snap = sm.snapshot(id).await?;
        let delta = pk
            .manifest_manager()
            .read_entries_of_list(&snap.delta_manifest_list)
            .await?;
        let added: i64 = delta
            .iter()
            .filter(|e| e.kind == tidelake::spec::FileKind::Add)
            .map(|e| e.file.file_size)
            .sum();
        if snap.commit_kind == tidelake::spec::CommitKind::Compact {
            rewritten += added;
        } else {
            ingested += added;
        }
    }
    let write_amp = (ingested + rewritten) as f64 / ingested.max(1) as f64;
    emit(
        "tidelake",
        "lsm",
        &[
            ("sorted_runs_per_bucket", serde_json::json!(runs)),
            ("bytes_ingested", ingested.into()),
            ("bytes_compacted", rewritten.into()),
            (
                "write_amplification",
                ((write_amp * 100.0).round() / 100.0).into(),
            ),
        ],
    );
    let c0 = Instant::now();
    pk.compact(true, vec![]).await?;
    let compact_s = c0.elapsed().as_secs_f64();
    let (wall_after, after) = median_read(&pk).await?;
    let count_after: usize = after.iter().map(|b| b.num_rows()).sum();
    ours.insert("read_compacted".into(), count_after as f64 / wall_after);
    emit(
        "tidelake",
        "read_after_full_compaction",
        &[
            ("full_compaction_s", compact_s.into()),
            ("rows", count_after.into()),
            (
                "rows_per_s",
                (count_after as f64 / wall_after).round().into(),
            ),
            ("count_ok", (count_after == next_new as usize).into()),
        ],
    );
    catalog.io().delete_dir("").await.ok();
    if !count_ok || !sum_ok {
        return Err(format!(
            "tidelake read back {count} rows (expected {next_new}), sum ok: {sum_ok}"
        )
        .into());
    }
    if args.no_peers {
        return Ok(());
    }

    // ---- peers, same sizes: pypaimon (insert/upsert/read, append) and delta-rs ----
    let mut peers: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for engine in ["paimon", "delta"] {
        let out = Command::new(&args.python)
            .arg(&args.peers_script)
            .args([
                "--engine",
                engine,
                "--rows",
                &n.to_string(),
                "--upserts",
                &u.to_string(),
            ])
            .args([
                "--batch",
                &args.batch.to_string(),
                "--buckets",
                &args.buckets.to_string(),
                "--lookups",
                "10",
            ])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", args.python))?;
        if !out.status.success() {
            eprintln!(
                "{engine} side failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        let rates = peers.entry(engine.to_string()).or_default();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            println!("{line}");
            if let (Some(phase), Some(rate)) = (v["phase"].as_str(), v["rows_per_s"].as_f64()) {
                rates.insert(phase.to_string(), rate);
            }
            if let (Some("upsert"), Some(us)) = (v["phase"].as_str(), v["us_per_upsert"].as_f64()) {
                rates.insert("us_per_upsert".to_string(), us);
            }
        }
    }
    let append_script = PathBuf::from("bench/pypaimon_append.py");
    let out = Command::new(&args.python)
        .arg(&append_script)
        .args(["--rows", &n.to_string(), "--batch", &args.batch.to_string()])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", args.python))?;
    if out.status.success() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            println!("{line}");
            if let Some(rate) = v["rows_per_s"].as_f64() {
                peers
                    .entry("paimon".into())
                    .or_default()
                    .insert("append".into(), rate);
            }
        }
    } else {
        eprintln!(
            "pypaimon append side failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!();
    println!(
        "{:<8} {:>16} {:>16} {:>7} {:>16} {:>7}",
        "phase", "tidelake rows/s", "pypaimon rows/s", "ratio", "delta-rs rows/s", "ratio"
    );
    let cell = |engine: &str, phase: &str| peers.get(engine).and_then(|m| m.get(phase)).copied();
    for phase in ["append", "insert", "upsert", "read"] {
        let Some(a) = ours.get(phase) else { continue };
        let fmt = |v: Option<f64>| match v {
            Some(b) => (format!("{b:.0}"), format!("{:.1}x", a / b)),
            None => ("-".to_string(), "-".to_string()),
        };
        let (p, pr) = fmt(cell("paimon", phase));
        let (d, dr) = fmt(cell("delta", phase));
        println!("{phase:<8} {a:>16.0} {p:>16} {pr:>7} {d:>16} {dr:>7}");
    }
    Ok(())
}
