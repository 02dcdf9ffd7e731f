//! Follows a table's changelog and prints every change.
//!
//! ```sh
//! cargo run -p tidelake-client --example subscribe -- http://127.0.0.1:50051 db.orders
//! ```
//!
//! Credentials come from `TIDELAKE_USER` / `TIDELAKE_PASSWORD`; `--from N` starts at snapshot N
//! (default: the latest snapshot in full, then its changes), `--until N` stops after snapshot N.

use tidelake_client::{ChangelogTicket, StartMode, Subscriber};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(endpoint), Some(table)) = (args.first(), args.get(1)) else {
        eprintln!("usage: subscribe ENDPOINT TABLE [--from N] [--until N]");
        std::process::exit(2);
    };
    let flag = |name: &str| -> Option<i64> {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1)?.parse().ok()
    };
    let mut ticket = ChangelogTicket {
        table: table.clone(),
        start: StartMode::LatestFull as i32,
        ..Default::default()
    };
    if let Some(from) = flag("--from") {
        ticket.start = StartMode::FromSnapshot as i32;
        ticket.snapshot_id = from;
    }
    ticket.end_snapshot_id = flag("--until").unwrap_or(0);
    let user = std::env::var("TIDELAKE_USER").unwrap_or_else(|_| "tidelake".into());
    let password = std::env::var("TIDELAKE_PASSWORD").unwrap_or_default();
    let mut sub = Subscriber::new(endpoint, &user, &password, ticket);
    let mut columns: Option<Vec<String>> = None;
    while let Some(changes) = sub.next().await {
        let changes = changes?;
        let b = &changes.batch;
        // An ALTER TABLE arrives as a new schema message: later batches have the new columns.
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        if columns.as_ref().is_some_and(|c| *c != names) {
            println!("schema {}", names.join(" "));
        }
        columns = Some(names);
        let kinds = b
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .ok_or("the first column is not _row_kind")?;
        let options = arrow_cast::display::FormatOptions::default().with_null("NULL");
        let formatters = (1..b.num_columns())
            .map(|c| arrow_cast::display::ArrayFormatter::try_new(b.column(c).as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..b.num_rows() {
            let values: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            println!(
                "{} {} {}",
                changes.snapshot_id,
                kinds.value(row),
                values.join(" ")
            );
        }
    }
    Ok(())
}
