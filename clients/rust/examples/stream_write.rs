//! A streaming write: upserts into a primary-key table in one long DoPut, a commit every
//! `--every-rows` rows, each acknowledged once durable; run it again with the same commit user and
//! it resumes after the last durable position.
//!
//! ```sh
//! TIDELAKE_USER=alice TIDELAKE_PASSWORD=... \
//!   cargo run -p tidelake-client --example stream_write -- http://127.0.0.1:50051 db.t \
//!   --commit-user producer-1 --positions 10 --every-rows 20
//! ```
//! The table needs columns `id BIGINT NOT NULL` (the key) and `v STRING`. Position p writes the
//! ten keys p*10..p*10+9. It prints `resume N` (or `resume none`), then `ack IDENTIFIER ROWS
//! SNAPSHOTS` per commit.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use tidelake_client::{Client, WriteKind, WriterOptions};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(endpoint), Some(table)) = (args.get(1), args.get(2)) else {
        return Err(
            "usage: stream_write ENDPOINT TABLE [--commit-user U] [--positions N] [--every-rows R]"
                .into(),
        );
    };
    let user = std::env::var("TIDELAKE_USER").unwrap_or_else(|_| "tidelake".into());
    let password = std::env::var("TIDELAKE_PASSWORD").unwrap_or_default();
    let positions: i64 = arg(&args, "--positions", "10").parse()?;
    let mut opts = WriterOptions::new(
        arg(&args, "--commit-user", "stream-write-example"),
        WriteKind::Upsert,
    );
    opts.every_rows = arg(&args, "--every-rows", "20").parse()?;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]));
    let mut client = Client::connect(endpoint, &user, &password).await?;
    let mut w = client.writer(table, schema.clone(), &opts).await?;
    let start = w.resume_position();
    match start {
        Some(p) => println!("resume {p}"),
        None => println!("resume none"),
    }
    let print = |a: &tidelake_client::WriteAck| {
        println!("ack {} {} {:?}", a.identifier, a.rows, a.snapshot_ids);
    };
    for p in start.map_or(0, |s| s + 1)..positions {
        let ids: Vec<i64> = (p * 10..p * 10 + 10).collect();
        let values: Vec<String> = ids.iter().map(|i| format!("p{p}-{i}")).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids)) as ArrayRef,
                Arc::new(StringArray::from(values)) as ArrayRef,
            ],
        )?;
        w.write(&batch, Some(p), false).await?;
        for a in w.try_acks()? {
            print(&a);
        }
    }
    for a in w.close().await? {
        print(&a);
    }
    Ok(())
}
