//! The `tidelake` command: table administration, loading and scanning on a warehouse, and the
//! benchmark. Every failure prints one `error:` line and exits non-zero.

mod cli;

// The system allocator returns large buffers to the OS and faults them back in on every batch;
// mimalloc keeps them, which the ingest and scan paths feel (about a tenth of their time).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tidelake::table::maintenance;
use tidelake::table::{Overwrite, SnapshotSelector, WriteOptions};
use tidelake::{Catalog, Identifier, TableDefinition};

#[derive(Debug, Parser)]
#[command(
    name = "tidelake",
    version,
    about = "Apache Paimon tables on a local or S3 warehouse"
)]
struct Args {
    /// Warehouse root: a directory (default ./warehouse, or the config's for `serve`),
    /// s3://BUCKET/PREFIX (settings from the AWS_* environment variables) or memory://.
    #[arg(long, global = true, env = "TIDELAKE_WAREHOUSE")]
    warehouse: Option<String>,
    /// How log lines (stderr) are written: `text`, or `json` (one object per line).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "TIDELAKE_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OutputFormat {
    Table,
    Jsonl,
    Csv,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the warehouse over Arrow Flight SQL (prints `tidelake listening on ADDR` when ready).
    Serve {
        /// Address to listen on (default 127.0.0.1:50051; port 0 picks a free port).
        #[arg(long)]
        listen: Option<String>,
        /// TOML config: warehouse, listen, [[users]] name/password_hash/role, [query]
        /// memory_limit_mb and timeout_seconds (see README).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print an argon2id hash of a password for `password_hash` in the config's [[users]]. The
    /// password is read from standard input (one line), or from the environment variable given.
    HashPassword {
        /// Read the password from this environment variable instead of standard input.
        #[arg(long)]
        password_env: Option<String>,
    },
    /// Run one SQL statement on the warehouse, without a server.
    Sql {
        /// The statement (one; a query prints its rows, an update its count).
        sql: String,
        /// The current database.
        #[arg(long, default_value = "default")]
        database: String,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Create a table: `create-table db.t --schema 'id BIGINT NOT NULL, v STRING' --primary-key id --option bucket=2`.
    CreateTable {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// Columns as `name TYPE [NOT NULL]`, comma-separated.
        #[arg(long)]
        schema: String,
        /// Primary-key columns, comma-separated (a primary-key table needs option bucket=N).
        #[arg(long, value_delimiter = ',')]
        primary_key: Vec<String>,
        /// Partition columns, comma-separated.
        #[arg(long, value_delimiter = ',')]
        partition_keys: Vec<String>,
        /// Table option KEY=VALUE (repeatable).
        #[arg(long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// The table's comment.
        #[arg(long)]
        comment: Option<String>,
        /// Succeed without change when the table exists.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// Drop a table and its files.
    DropTable {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// Succeed without change when the table does not exist.
        #[arg(long)]
        if_exists: bool,
    },
    /// Load a Parquet, CSV (with header) or JSON-lines file as one commit.
    Load {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The input file.
        file: PathBuf,
        /// parquet, csv or jsonl; by default taken from the file extension.
        #[arg(long)]
        format: Option<String>,
        /// An input column with +I/-U/+U/-D per row (not stored).
        #[arg(long)]
        row_kind_column: Option<String>,
        /// Replace the table's rows (or, with --partition, those partitions).
        #[arg(long)]
        overwrite: bool,
        /// Partition KEY=VALUE to overwrite (repeatable; needs --overwrite).
        #[arg(long = "partition", value_name = "KEY=VALUE", requires = "overwrite")]
        partitions: Vec<String>,
    },
    /// Print a table's schema, latest snapshot, and files, sorted runs, rows and bytes per bucket.
    Info { table: String },
    /// Apply schema changes: the SQL after `ALTER TABLE <table>` (`ADD COLUMN c INT`, `RENAME
    /// COLUMN a TO b`, `SET ('k' = 'v')`, `RENAME TO t2`, ...).
    Alter { table: String, changes: String },
    /// Print a table's changes (+I/-U/+U/-D), snapshot by snapshot; follows new commits unless
    /// --until bounds it.
    Changelog {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// First snapshot whose changes are printed (default: the latest snapshot in full, then
        /// the changes after it).
        #[arg(long)]
        from: Option<i64>,
        /// Stop after this snapshot.
        #[arg(long)]
        until: Option<i64>,
        /// Record progress as this consumer (and resume from it).
        #[arg(long)]
        consumer_id: Option<String>,
        /// Columns to print after the row kind, comma-separated.
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: OutputFormat,
    },
    /// Print the rows of a table at a snapshot.
    Scan {
        /// The table, as DATABASE.TABLE.
        table: String,
        /// The snapshot id.
        #[arg(long, conflicts_with = "timestamp_millis")]
        snapshot_id: Option<i64>,
        /// Read the snapshot current at this time (epoch milliseconds).
        #[arg(long, conflicts_with = "tag")]
        timestamp_millis: Option<i64>,
        /// Read the snapshot a tag pins.
        #[arg(long, conflicts_with = "snapshot_id")]
        tag: Option<String>,
        /// Columns to return, comma-separated.
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        /// Partition KEY=VALUE filter (repeatable).
        #[arg(long = "partition", value_name = "KEY=VALUE")]
        partitions: Vec<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
        /// Print at most this many rows.
        #[arg(long)]
        limit: Option<usize>,
    },
    #[command(flatten)]
    Maintenance(cli::maintenance::Maintenance),
    /// List a table's snapshots.
    Snapshots { table: String },
    /// List the tables of one database, or of all.
    Tables { database: Option<String> },
    /// Run workload W on tidelake and on pypaimon and print both with their ratio.
    Bench(cli::bench::BenchArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    // `TIDELAKE_LOG`, else `RUST_LOG` (the same syntax), else warnings only.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TIDELAKE_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_env("RUST_LOG"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colours only for a terminal; JSON lines when asked (for log shippers).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match args.log_format {
        LogFormat::Text => log.init(),
        LogFormat::Json => log.json().with_ansi(false).init(),
    }
    let runtime = match tidelake::runtime::io_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            // A long operation stopped by Ctrl-C exits as an interrupted command does.
            let cancelled = e
                .downcast_ref::<tidelake::Error>()
                .is_some_and(|e| e.kind() == tidelake::error::ErrorKind::Cancelled);
            if cancelled {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn run(args: Args) -> cli::Result<()> {
    let given_warehouse = args.warehouse.clone();
    let warehouse = args
        .warehouse
        .clone()
        .unwrap_or_else(|| "./warehouse".to_string());
    // Commands that create a table or run SQL create the warehouse; every other one reads or
    // changes tables that must exist, so a mistyped path is an error naming it.
    let creating = warehouse.clone();
    let open_creating = move || Catalog::open(&creating);
    let open = move || Catalog::open_existing(&warehouse);
    match args.command {
        Command::Serve { listen, config } => {
            let config = match &config {
                Some(path) => {
                    #[allow(clippy::disallowed_methods)] // One small file read at start-up.
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| format!("config {}: {e}", path.display()))?;
                    tidelake::server::ServerConfig::parse(&text, &path.display().to_string())?
                }
                None => tidelake::server::ServerConfig::default(),
            };
            let options = tidelake::server::ServeOptions::resolve(config, given_warehouse, listen)?;
            tidelake::server::serve(options).await?;
        }
        Command::HashPassword { password_env } => {
            let password = match password_env {
                Some(name) => std::env::var(&name)
                    .map_err(|_| format!("environment variable {name} is not set"))?,
                None => {
                    let mut line = String::new();
                    std::io::stdin()
                        .read_line(&mut line)
                        .map_err(|e| format!("reading the password from standard input: {e}"))?;
                    line.trim_end_matches(['\r', '\n']).to_string()
                }
            };
            if password.is_empty() {
                return Err("the password is empty".into());
            }
            println!(
                "{}",
                tidelake::server::auth::password::hash_password(&password)?
            );
        }
        Command::Sql {
            sql,
            database,
            format,
        } => {
            let catalog = open_creating()?;
            catalog.create_database("default", true).await?;
            let engine = tidelake::sql::SqlEngine::new(catalog, Default::default())?;
            let session = tidelake::sql::SqlSession {
                database,
                ..Default::default()
            };
            let out = engine.execute(&session, &sql, &[]).await?;
            let schema = std::sync::Arc::clone(&out.schema);
            let batches = out.collect().await?;
            cli::output::print(&schema, &batches, format)?;
        }
        // The cross-partition bench reads the bench's arguments; the bench does not know it.
        Command::Bench(b) if b.cross_partition => return cli::cross_bench::run(&b).await,
        Command::Bench(b) => return cli::bench::run(&b).await,
        Command::CreateTable {
            table,
            schema,
            primary_key,
            partition_keys,
            options,
            comment,
            if_not_exists,
        } => {
            let catalog = open_creating()?;
            let id = Identifier::parse(&table)?;
            let def = TableDefinition {
                columns: TableDefinition::parse_columns(&schema)?,
                primary_keys: primary_key,
                partition_keys,
                options: cli::key_values(&options, "option")?
                    .into_iter()
                    .collect::<BTreeMap<_, _>>(),
                comment,
                column_comments: Default::default(),
            };
            catalog.create_table(&id, &def, if_not_exists).await?;
            println!("created {id}");
        }
        Command::DropTable { table, if_exists } => {
            let catalog = open()?;
            let id = Identifier::parse(&table)?;
            catalog.drop_table(&id, if_exists).await?;
            println!("dropped {id}");
        }
        Command::Load {
            table,
            file,
            format,
            row_kind_column,
            overwrite,
            partitions,
        } => {
            let catalog = open()?;
            let id = Identifier::parse(&table)?;
            let t = catalog.load_table(&id).await?;
            let batches =
                cli::input::read_file(&file, format.as_deref(), &t, row_kind_column.as_deref())?;
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            let ow = if overwrite {
                if partitions.is_empty() {
                    Some(Overwrite::Table)
                } else {
                    Some(Overwrite::Partitions(t.partition_values(
                        &cli::key_values(&partitions, "partition")?,
                    )?))
                }
            } else {
                None
            };
            let outcome = t
                .write_batches(
                    &batches,
                    WriteOptions {
                        row_kind_column: row_kind_column.clone(),
                    },
                    ow,
                )
                .await?;
            let kinds = match &row_kind_column {
                Some(column) => cli::input::row_kind_counts(&batches, column)?,
                None => String::new(),
            };
            match outcome.snapshot_id() {
                Some(s) => println!("loaded {rows} rows into {id}{kinds}: snapshot {s}"),
                None => println!("nothing to load into {id}: the file has no rows"),
            }
        }
        Command::Info { table } => {
            let catalog = open()?;
            let t = catalog.load_table(&Identifier::parse(&table)?).await?;
            let info = maintenance::summary(&t).await?;
            println!(
                "table {} (schema {}, latest snapshot {})",
                info.table, info.schema_id, info.latest_snapshot_id
            );
            println!("{}", info.schema_json);
            println!("partition\tbucket\tfiles\tsorted_runs\trows\tbytes");
            for b in &info.buckets {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    if b.partition.is_empty() {
                        "-"
                    } else {
                        &b.partition
                    },
                    b.bucket,
                    b.files,
                    b.sorted_runs,
                    b.rows,
                    b.bytes
                );
            }
            println!("total\t\t\t\t{}\t{}", info.total_rows, info.total_bytes);
        }
        Command::Alter { table, changes } => {
            let catalog = open()?;
            let id = Identifier::parse(&table)?;
            let engine = tidelake::sql::SqlEngine::new(catalog, Default::default())?;
            let session = tidelake::sql::SqlSession {
                database: id.database.clone(),
                ..Default::default()
            };
            let altered = engine.alter_table_with(&session, &id, &changes).await?;
            println!(
                "altered {} (schema {})",
                altered.identifier(),
                altered.schema().id
            );
        }
        Command::Changelog {
            table,
            from,
            until,
            consumer_id,
            columns,
            format,
        } => {
            use tidelake::table::changes::{ChangeEvent, StartMode, StreamOptions, Subscription};
            let catalog = open()?;
            let t = catalog.load_table(&Identifier::parse(&table)?).await?;
            let opts = StreamOptions {
                start: from.map_or(StartMode::Default, StartMode::FromSnapshot),
                consumer_id,
                end_snapshot: until,
                projection: (!columns.is_empty()).then_some(columns),
                ..Default::default()
            };
            let mut sub =
                Subscription::start(t, opts, std::time::Duration::from_secs(3600)).await?;
            let mut schema = sub.schema();
            while let Some(event) = sub.next().await {
                match event? {
                    ChangeEvent::Rows { snapshot_id, batch } => {
                        eprintln!("snapshot {snapshot_id}");
                        cli::output::print(&schema, &[batch], format)?;
                    }
                    ChangeEvent::SchemaChanged {
                        snapshot_id,
                        schema: new,
                    } => {
                        eprintln!("schema changed at snapshot {snapshot_id}");
                        schema = new;
                    }
                    ChangeEvent::Completed { .. } | ChangeEvent::Idle { .. } => {}
                }
            }
        }
        Command::Scan {
            table,
            snapshot_id,
            timestamp_millis,
            tag,
            columns,
            partitions,
            format,
            limit,
        } => {
            let catalog = open()?;
            let id = Identifier::parse(&table)?;
            let t = catalog.load_table(&id).await?;
            let selector = match (snapshot_id, timestamp_millis, tag) {
                (Some(s), _, _) => SnapshotSelector::Id(s),
                (None, Some(ts), _) => SnapshotSelector::TimestampMillis(ts),
                (None, None, Some(tag)) => SnapshotSelector::Tag(tag),
                (None, None, None) => SnapshotSelector::Latest,
            };
            let filter = t.partition_values(&cli::key_values(&partitions, "partition")?)?;
            let plan = t
                .new_scan()
                .snapshot(selector)
                .partition_filter(filter)
                .plan()
                .await?;
            let projection = if columns.is_empty() {
                None
            } else {
                Some(columns)
            };
            let read = t.new_read(projection.as_deref())?;
            let mut batches = read.collect(plan).await?;
            if let Some(limit) = limit {
                batches = cli::output::limit(batches, limit);
            }
            cli::output::print(&read.schema(), &batches, format)?;
        }
        Command::Maintenance(m) => m.run(open()?).await?,
        Command::Snapshots { table } => {
            let catalog = open()?;
            let id = Identifier::parse(&table)?;
            let t = catalog.load_table(&id).await?;
            cli::output::print_snapshots(&t).await?;
        }
        Command::Tables { database } => {
            let catalog = open()?;
            let dbs = match database {
                Some(d) => vec![d],
                None => catalog.list_databases().await?,
            };
            for db in dbs {
                for t in catalog.list_tables(&db).await? {
                    println!("{db}.{t}");
                }
            }
        }
    }
    Ok(())
}
