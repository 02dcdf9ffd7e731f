//! The typed client end to end: SQL, bulk ingest with row kinds, ALTER TABLE, compaction with
//! progress, tags and table info.
//!
//! ```sh
//! TIDELAKE_USER=alice TIDELAKE_PASSWORD=... \
//!   cargo run -p tidelake-client --example quickstart -- http://127.0.0.1:50051 demo
//! ```

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use tidelake_client::admin::CompactRequest;
use tidelake_client::{Client, IngestMode, IngestOptions};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    Ok(RecordBatch::try_from_iter(columns)?)
}

fn print_rows(batches: &[RecordBatch]) -> Result<()> {
    let options = arrow_cast::display::FormatOptions::default().with_null("NULL");
    for b in batches {
        let formatters = b
            .columns()
            .iter()
            .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in 0..b.num_rows() {
            let values: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            println!("row {}", values.join(" "));
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(endpoint), Some(db)) = (args.first(), args.get(1)) else {
        eprintln!("usage: quickstart ENDPOINT DATABASE");
        std::process::exit(2);
    };
    let user = std::env::var("TIDELAKE_USER").unwrap_or_else(|_| "tidelake".into());
    let password = std::env::var("TIDELAKE_PASSWORD").unwrap_or_default();
    let mut client = Client::connect(endpoint, &user, &password).await?;
    let table = format!("{db}.items");
    client
        .execute(&format!("CREATE DATABASE IF NOT EXISTS {db}"))
        .await?;
    client
        .execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await?;

    // A new primary-key table from Arrow batches.
    let rows = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("name", Arc::new(StringArray::from(vec!["apple", "pear"]))),
        ("qty", Arc::new(Int64Array::from(vec![3, 5]))),
    ])?;
    let create = IngestOptions {
        mode: IngestMode::Create,
        primary_key: vec!["id".into()],
        options: vec![("bucket".into(), "1".into())],
        ..Default::default()
    };
    println!(
        "ingested {}",
        client.ingest(&table, vec![rows], &create).await?
    );

    // Changes with row kinds: an update, a delete and an insert in one commit.
    let changes = batch(vec![
        (
            "_row_kind",
            Arc::new(StringArray::from(vec!["+U", "-D", "+I"])) as ArrayRef,
        ),
        ("id", Arc::new(Int64Array::from(vec![1, 2, 3]))),
        (
            "name",
            Arc::new(StringArray::from(vec!["apple", "pear", "plum"])),
        ),
        ("qty", Arc::new(Int64Array::from(vec![4, 5, 1]))),
    ])?;
    println!(
        "applied {}",
        client.apply_changes(&table, vec![changes]).await?
    );
    print_rows(
        &client
            .query(&format!("SELECT * FROM {table} ORDER BY id"))
            .await?,
    )?;

    // Schema evolution through the admin action (the same as ALTER TABLE in SQL).
    let info = client.alter_table(&table, "ADD COLUMN note STRING").await?;
    println!("schema {}", info.schema_id);

    // A full compaction, reporting its progress.
    let mut reports = 0;
    let mut last_phase = String::new();
    let req = CompactRequest {
        table: table.clone(),
        full: true,
        ..Default::default()
    };
    let result = client
        .compact_with_progress(req, |p| {
            reports += 1;
            last_phase = p.phase.clone();
        })
        .await?;
    println!(
        "compacted {} bucket(s); progress reports: {}; last phase: {last_phase}",
        result.buckets_compacted,
        if reports > 0 { "yes" } else { "no" }
    );

    let tags = client.create_tag(&table, "v1", None).await?;
    for t in &tags.tags {
        println!("tag {} -> snapshot {}", t.name, t.snapshot_id);
    }
    let info = client.table_info(&table).await?;
    println!(
        "table {}: {} row(s) in {} file(s)",
        info.table,
        info.total_rows,
        info.buckets.iter().map(|b| b.files).sum::<i64>()
    );
    match client.table_info(&format!("{db}.nope")).await {
        Err(tidelake_client::Error::Status(s)) => println!("missing table: {:?}", s.code()),
        other => println!("missing table: unexpected {other:?}"),
    }
    Ok(())
}
