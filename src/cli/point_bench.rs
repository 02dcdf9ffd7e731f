//! `tidelake bench --point-queries <URL>`: concurrent Flight SQL clients running a bound point
//! query against a running server, for a fixed time; prints queries/s and latency percentiles as
//! one JSON line.
//!
//! Each client has its own connection, logs in with a Basic handshake, prepares
//! `SELECT * FROM <table> WHERE id = ?` once and then, per query, makes the calls the ADBC and
//! JDBC drivers make for a bound prepared query: DoPut of the parameter batch (taking the handle
//! the server answers with), GetFlightInfo of the prepared statement, DoGet of each endpoint.
//! Every answer must be the key's one row. The client is arrow-flight's, so it costs the shared
//! cores little: the figure is the server's ceiling, where Python clients show their own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
    CommandPreparedStatementQuery, DoPutPreparedStatementResult, ProstMessageExt,
};
use arrow_flight::{Action, FlightData, FlightDescriptor};
use futures::TryStreamExt;
use prost::Message;

use super::Result;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PointBenchArgs {
    /// Run the point-query clients against this server (`grpc://host:port`) instead of workload W.
    #[arg(long = "point-queries", value_name = "URL")]
    pub(crate) url: Option<String>,
    /// The primary-key table queried (its key column is `id BIGINT`).
    #[arg(long, default_value = "default.w_1")]
    table: String,
    /// Keys are drawn uniformly from 0 to this (exclusive); each must exist.
    #[arg(long, default_value_t = 1_000_000)]
    key_below: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// How long the clients run (after one warm-up query each).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The user the clients log in as (its password: `TIDELAKE_PASSWORD`).
    #[arg(long, default_value = "bench")]
    user: String,
}

/// A request carrying the bearer token.
fn authorized<T>(
    message: T,
    bearer: &tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", bearer.clone());
    request
}

/// One client: a connection, a statement prepared once, queries until `until`; the latency of
/// each query. Every response stream is read to its end, as the ADBC driver reads them
/// (dropping a DoPut's answer after its first message makes the client's HTTP/2 library reset
/// the stream, and it closes the connection after 1024 such resets).
async fn client(args: PointBenchArgs, url: String, seed: u64, until: Instant) -> Result<Vec<f64>> {
    let channel = tonic::transport::Endpoint::from_shared(url.replace("grpc://", "http://"))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let mut sql = FlightSqlServiceClient::new(channel);
    let password = std::env::var("TIDELAKE_PASSWORD").unwrap_or_default();
    sql.handshake(&args.user, &password).await?;
    let bearer: tonic::metadata::MetadataValue<_> = format!(
        "Bearer {}",
        sql.token().ok_or("the handshake returned no token")?
    )
    .parse()?;
    let create = ActionCreatePreparedStatementRequest {
        query: format!("SELECT * FROM {} WHERE id = ?", args.table),
        transaction_id: None,
    };
    let action = Action::new("CreatePreparedStatement", create.as_any().encode_to_vec());
    let mut results = sql
        .inner_mut()
        .do_action(authorized(action, &bearer))
        .await?
        .into_inner();
    let created = results
        .message()
        .await?
        .ok_or("CreatePreparedStatement answered nothing")?;
    while results.message().await?.is_some() {}
    let created: ActionCreatePreparedStatementResult = Any::decode(created.body)?
        .unpack()?
        .ok_or("CreatePreparedStatement answered another message")?;
    let mut handle = created.prepared_statement_handle;
    let params = Arc::new(Schema::new(vec![Field::new("$1", DataType::Int64, true)]));
    let mut rng = seed | 1;
    let mut latencies = Vec::new();
    let mut warm = false;
    while Instant::now() < until || !warm {
        // xorshift: enough for spreading keys.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let key = (rng % args.key_below) as i64;
        let start = Instant::now();
        let query = CommandPreparedStatementQuery {
            prepared_statement_handle: handle.clone(),
        };
        // DoPut of the parameters; the answer may carry a new handle.
        let batch = RecordBatch::try_new(
            Arc::clone(&params),
            vec![Arc::new(Int64Array::from(vec![key]))],
        )?;
        let put: Vec<FlightData> = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(FlightDescriptor::new_cmd(
                query.as_any().encode_to_vec(),
            )))
            .build(futures::stream::iter([Ok(batch)]))
            .try_collect()
            .await?;
        let mut answers = sql
            .inner_mut()
            .do_put(authorized(futures::stream::iter(put), &bearer))
            .await?
            .into_inner();
        while let Some(answer) = answers.message().await? {
            let result = DoPutPreparedStatementResult::decode(answer.app_metadata)?;
            if let Some(h) = result.prepared_statement_handle {
                handle = h;
            }
        }
        // GetFlightInfo of the prepared statement, then DoGet of each endpoint.
        let query = CommandPreparedStatementQuery {
            prepared_statement_handle: handle.clone(),
        };
        let descriptor = FlightDescriptor::new_cmd(query.as_any().encode_to_vec());
        let info = sql
            .inner_mut()
            .get_flight_info(authorized(descriptor, &bearer))
            .await?
            .into_inner();
        let mut rows = Vec::new();
        for endpoint in info.endpoint {
            let ticket = endpoint.ticket.ok_or("an endpoint without a ticket")?;
            let batches: Vec<RecordBatch> = sql.do_get(ticket).await?.try_collect().await?;
            for b in batches {
                let ids = b
                    .column_by_name("id")
                    .ok_or("the answer has no id column")?
                    .as_primitive_opt::<Int64Type>()
                    .ok_or("id is not BIGINT")?;
                rows.extend(ids.iter().flatten());
            }
        }
        if rows != [key] {
            return Err(format!("id = {key} answered ids {rows:?}").into());
        }
        if warm {
            latencies.push(start.elapsed().as_secs_f64());
        }
        warm = true;
    }
    Ok(latencies)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(crate) async fn run(args: &PointBenchArgs) -> Result<()> {
    let url = args.url.clone().ok_or("--point-queries needs a URL")?;
    if args.clients == 0 || args.key_below == 0 {
        return Err("--clients and --key-below must be at least 1".into());
    }
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(args.seconds);
    let tasks: Vec<_> = (0..args.clients)
        .map(|i| {
            tokio::spawn(client(
                args.clone(),
                url.clone(),
                0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1),
                until,
            ))
        })
        .collect();
    let mut every = Vec::new();
    for t in tasks {
        every.extend(t.await??);
    }
    let wall = start.elapsed().as_secs_f64();
    every.sort_by(f64::total_cmp);
    let line = serde_json::json!({
        "bench": "flight",
        "op": "point_query",
        "path": format!("rust flight sql bound ?, {} clients", args.clients),
        "queries": every.len(),
        "queries_per_s": (every.len() as f64 / wall * 10.0).round() / 10.0,
        "p50_ms": (percentile(&every, 50.0) * 1e6).round() / 1e3,
        "p99_ms": (percentile(&every, 99.0) * 1e6).round() / 1e3,
        "mean_ms": (every.iter().sum::<f64>() / every.len().max(1) as f64 * 1e6).round() / 1e3,
    });
    println!("{line}");
    Ok(())
}
