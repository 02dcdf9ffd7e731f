//! The Flight SQL server through raw Flight calls: the call sequence of the Arrow Flight SQL JDBC
//! driver (its jar is not available here), authentication failures, and error statuses. The
//! Python suite (`tests/python`) drives the same server with the real ADBC driver and pyarrow.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, DoPutPreparedStatementResult, DoPutUpdateResult,
    ProstMessageExt, SqlInfo,
};
use arrow_flight::{Action, FlightDescriptor, FlightInfo, HandshakeRequest};
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};

use crate::common::Scratch;

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<tidelake::error::Result<()>>,
    _scratch: Scratch,
}

impl Server {
    async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A server whose options `adjust` changes first.
    async fn start_with(adjust: impl FnOnce(&mut tidelake::server::ServeOptions)) -> Self {
        let scratch = Scratch::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut options = tidelake::server::ServeOptions {
            warehouse: scratch.path().to_string(),
            listen: addr.to_string(),
            users: [
                ("jdbc", tidelake::sql::Role::Admin),
                ("ro", tidelake::sql::Role::Reader),
                ("rw", tidelake::sql::Role::Writer),
            ]
            .into_iter()
            .map(|(u, role)| {
                let credential = tidelake::server::auth::password::Credential::Plain("pw".into());
                let tenant = tidelake::sql::CATALOG_NAME.to_string();
                let user = tidelake::server::auth::User {
                    credential,
                    role,
                    tenant,
                };
                (u.to_string(), user)
            })
            .collect(),
            auth: Default::default(),
            tenants: vec![],
            tls: None,
            audit_file: None,
            storage: Default::default(),
            metrics_listen: None,
            rest_listen: None,
            rest_data_tokens: None,
            limits: Default::default(),
            work: Default::default(),
            max_streams: tidelake::server::DEFAULT_MAX_STREAMS,
        };
        adjust(&mut options);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            tidelake::server::run(listener, &options, async {
                let _ = rx.await;
            })
            .await
        });
        Self {
            addr,
            stop: Some(tx),
            task,
            _scratch: scratch,
        }
    }

    async fn client(&self) -> FlightServiceClient<Channel> {
        for _ in 0..50 {
            let endpoint =
                tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr)).unwrap();
            if let Ok(channel) = endpoint.connect().await {
                return FlightServiceClient::new(channel)
                    .max_decoding_message_size(64 * 1024 * 1024);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("server did not start");
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.await.unwrap().unwrap();
    }
}

fn authed<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        MetadataValue::try_from(format!("Bearer {token}")).unwrap(),
    );
    r
}

/// JDBC's handshake: Basic credentials in the header, the token read from the response header.
async fn handshake(
    c: &mut FlightServiceClient<Channel>,
    user: &str,
    password: &str,
) -> Result<String, tonic::Status> {
    use base64::Engine;
    let creds = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut req = Request::new(futures::stream::iter([HandshakeRequest::default()]));
    req.metadata_mut().insert(
        "authorization",
        MetadataValue::try_from(format!("Basic {creds}")).unwrap(),
    );
    let resp = c.handshake(req).await?;
    let header = resp
        .metadata()
        .get("authorization")
        .expect("token in the response header")
        .to_str()
        .unwrap()
        .to_string();
    let mut s = resp.into_inner();
    while s.next().await.is_some() {}
    Ok(header.strip_prefix("Bearer ").unwrap().to_string())
}

fn cmd<M: ProstMessageExt>(m: M) -> FlightDescriptor {
    FlightDescriptor::new_cmd(m.as_any().encode_to_vec())
}

/// GetFlightInfo then DoGet of its one endpoint; checks the streamed schema equals FlightInfo's.
async fn fetch(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    descriptor: FlightDescriptor,
) -> Vec<RecordBatch> {
    let info: FlightInfo = c
        .get_flight_info(authed(descriptor, token))
        .await
        .unwrap()
        .into_inner();
    let declared = info.clone().try_decode_schema().unwrap();
    assert_eq!(info.endpoint.len(), 1);
    assert!(
        info.endpoint[0].location.is_empty(),
        "no endpoint locations"
    );
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let stream = c.do_get(authed(ticket, token)).await.unwrap().into_inner();
    let mut batches = FlightRecordBatchStream::new_from_flight_data(
        stream.map_err(arrow_flight::error::FlightError::from),
    );
    let mut out = Vec::new();
    while let Some(b) = batches.next().await {
        out.push(b.unwrap());
    }
    let streamed = batches.schema().cloned().unwrap();
    assert_eq!(
        streamed.as_ref(),
        &declared,
        "DoGet schema equals FlightInfo schema"
    );
    out
}

async fn action(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    kind: &str,
    body: Vec<u8>,
) -> Result<Vec<Vec<u8>>, tonic::Status> {
    let a = Action {
        r#type: kind.to_string(),
        body: body.into(),
    };
    let s = c.do_action(authed(a, token)).await?.into_inner();
    let results: Vec<_> = s.try_collect().await?;
    Ok(results.into_iter().map(|r| r.body.to_vec()).collect())
}

/// Prepares `sql` as JDBC does; returns the result and the `is_update` flag (field 4).
async fn prepare(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    sql: &str,
) -> Result<(ActionCreatePreparedStatementResult, bool), tonic::Status> {
    let req = ActionCreatePreparedStatementRequest {
        query: sql.to_string(),
        transaction_id: None,
    };
    let bodies = action(
        c,
        token,
        "CreatePreparedStatement",
        req.as_any().encode_to_vec(),
    )
    .await?;
    let any = Any::decode(bodies[0].as_slice()).unwrap();
    let result: ActionCreatePreparedStatementResult = any.unpack().unwrap().unwrap();
    // `optional bool is_update = 4` is the trailing varint field 0x20.
    let is_update = any.value.ends_with(&[0x20, 0x01]);
    Ok((result, is_update))
}

async fn close(c: &mut FlightServiceClient<Channel>, token: &str, handle: bytes::Bytes) {
    let req = ActionClosePreparedStatementRequest {
        prepared_statement_handle: handle,
    };
    action(
        c,
        token,
        "ClosePreparedStatement",
        req.as_any().encode_to_vec(),
    )
    .await
    .unwrap();
}

/// DoPut of `batches` (possibly none) under a command descriptor; returns the PutResult body.
async fn put(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    descriptor: FlightDescriptor,
    schema: Schema,
    batches: Vec<RecordBatch>,
) -> Result<Vec<u8>, tonic::Status> {
    let input = futures::stream::iter(batches.into_iter().map(Ok));
    let flight = arrow_flight::encode::FlightDataEncoderBuilder::new()
        .with_schema(std::sync::Arc::new(schema))
        .with_flight_descriptor(Some(descriptor))
        .build(input)
        .map(|r| r.unwrap());
    let flight: Vec<_> = flight.collect().await;
    let resp = c
        .do_put(authed(futures::stream::iter(flight), token))
        .await?
        .into_inner();
    let results: Vec<_> = resp.try_collect().await?;
    Ok(results
        .first()
        .map(|r| r.app_metadata.to_vec())
        .unwrap_or_default())
}

/// Binds one Int64 parameter to a prepared query (DoPut) and fetches it with the new handle.
async fn bind_and_fetch(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    handle: bytes::Bytes,
    value: i64,
) -> Vec<RecordBatch> {
    let param_schema = Schema::new(vec![Field::new("$1", DataType::Int64, true)]);
    let params = RecordBatch::try_new(
        std::sync::Arc::new(param_schema.clone()),
        vec![std::sync::Arc::new(arrow::array::Int64Array::from(vec![
            value,
        ]))],
    )
    .unwrap();
    let body = put(
        c,
        token,
        cmd(CommandPreparedStatementQuery {
            prepared_statement_handle: handle,
        }),
        param_schema,
        vec![params],
    )
    .await
    .unwrap();
    let new_handle = DoPutPreparedStatementResult::decode(body.as_slice())
        .unwrap()
        .prepared_statement_handle
        .unwrap();
    fetch(
        c,
        token,
        cmd(CommandPreparedStatementQuery {
            prepared_statement_handle: new_handle,
        }),
    )
    .await
}

/// Executes an update as JDBC does: prepare (empty dataset schema, is_update), DoPut of the
/// prepared update, close. Returns the count.
async fn jdbc_update(c: &mut FlightServiceClient<Channel>, token: &str, sql: &str) -> i64 {
    let (prepared, is_update) = prepare(c, token, sql).await.unwrap();
    assert!(is_update, "{sql} is an update");
    assert!(
        prepared.dataset_schema.is_empty(),
        "JDBC reads an empty schema as an update"
    );
    let handle = prepared.prepared_statement_handle.clone();
    let body = put(
        c,
        token,
        cmd(CommandPreparedStatementUpdate {
            prepared_statement_handle: handle.clone(),
        }),
        Schema::empty(),
        vec![],
    )
    .await
    .unwrap();
    close(c, token, handle).await;
    DoPutUpdateResult::decode(body.as_slice())
        .unwrap()
        .record_count
}

/// Executes a query as JDBC does: prepare (schema returned), GetFlightInfo + DoGet, close.
async fn jdbc_query(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    sql: &str,
) -> Vec<RecordBatch> {
    let (prepared, is_update) = prepare(c, token, sql).await.unwrap();
    assert!(!is_update);
    assert!(
        !prepared.dataset_schema.is_empty(),
        "a query's schema comes at prepare time"
    );
    let handle = prepared.prepared_statement_handle.clone();
    let batches = fetch(
        c,
        token,
        cmd(CommandPreparedStatementQuery {
            prepared_statement_handle: handle.clone(),
        }),
    )
    .await;
    close(c, token, handle).await;
    batches
}

fn strings(batches: &[RecordBatch], col: usize) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        let c = arrow::compute::cast(b.column(col), &DataType::Utf8).unwrap();
        let c = c.as_string::<i32>();
        for i in 0..c.len() {
            out.push(c.value(i).to_string());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jdbc_call_sequence() {
    let server = Server::start().await;
    let mut c = server.client().await;
    jdbc_sequence(&mut c).await;
    server.stop().await;
}

/// The JDBC driver with `useEncryption=true`: the same call sequence over TLS, trusting the CA
/// that signed the server's certificate (for `localhost` and 127.0.0.1); a plaintext client to
/// the TLS port fails to connect and the server stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jdbc_call_sequence_over_tls() {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let tls = tidelake::server::tls::TlsOptions {
        cert_pem: cert.pem().into_bytes(),
        key_pem: key.serialize_pem().into_bytes(),
        client_ca_pem: None,
    };
    let server = Server::start_with(|o| o.tls = Some(tls)).await;
    let endpoint = tonic::transport::Endpoint::from_shared(format!(
        "https://localhost:{}",
        server.addr.port()
    ))
    .unwrap()
    .tls_config(
        tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(ca.pem()))
            .domain_name("localhost"),
    )
    .unwrap();
    let channel = endpoint.connect().await.unwrap();
    let mut c = FlightServiceClient::new(channel).max_decoding_message_size(64 * 1024 * 1024);
    jdbc_sequence(&mut c).await;
    // Plaintext to the TLS port: no HTTP/2 connection comes up.
    let plain = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .connect_timeout(std::time::Duration::from_secs(5));
    let refused = match plain.connect().await {
        Err(_) => true,
        Ok(ch) => FlightServiceClient::new(ch)
            .list_actions(Request::new(arrow_flight::Empty {}))
            .await
            .is_err(),
    };
    assert!(refused, "a plaintext client was served on the TLS port");
    // The TLS client is still served.
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    assert!(!token.is_empty());
    server.stop().await;
}

/// What the Arrow Flight SQL JDBC driver sends, in its order, on one connection.
async fn jdbc_sequence(c: &mut FlightServiceClient<Channel>) {
    let mut c = c.clone();
    // 1. Handshake.
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    // 2. DatabaseMetaData: one GetSqlInfo with no ids (all of them).
    let info = fetch(&mut c, &token, cmd(CommandGetSqlInfo { info: vec![] })).await;
    let names: Vec<u32> = info
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::UInt32Type>()
                .values()
                .to_vec()
        })
        .collect();
    for key in [
        SqlInfo::FlightSqlServerName as u32,
        SqlInfo::FlightSqlServerVersion as u32,
        SqlInfo::FlightSqlServerTransaction as u32,
        SqlInfo::SqlIdentifierQuoteChar as u32,
        SqlInfo::SqlKeywords as u32,
        SqlInfo::SqlTransactionsSupported as u32,
    ] {
        assert!(names.contains(&key), "SqlInfo {key} answered");
    }
    // 3. Catalogs, schemas.
    let cats = fetch(&mut c, &token, cmd(CommandGetCatalogs {})).await;
    assert_eq!(strings(&cats, 0), vec!["tidelake"]);
    // 4. Every statement is prepared: DDL and DML through the prepared update path.
    assert_eq!(
        jdbc_update(
            &mut c,
            &token,
            "CREATE TABLE default.j (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')"
        )
        .await,
        0
    );
    assert_eq!(
        jdbc_update(
            &mut c,
            &token,
            "INSERT INTO default.j VALUES (1, 'a'), (2, 'b'), (3, 'c')"
        )
        .await,
        3
    );
    assert_eq!(
        jdbc_update(&mut c, &token, "DELETE FROM default.j WHERE id = 3").await,
        1
    );
    let schemas = fetch(
        &mut c,
        &token,
        cmd(CommandGetDbSchemas {
            catalog: Some("tidelake".into()),
            db_schema_filter_pattern: None,
        }),
    )
    .await;
    assert_eq!(strings(&schemas, 1), vec!["default"]);
    let tables = fetch(
        &mut c,
        &token,
        cmd(CommandGetTables {
            catalog: Some("tidelake".into()),
            db_schema_filter_pattern: Some("def%".into()),
            table_name_filter_pattern: Some("j".into()),
            table_types: vec!["TABLE".into()],
            include_schema: true,
        }),
    )
    .await;
    assert_eq!(strings(&tables, 2), vec!["j"]);
    // The table schema travels IPC-encoded; it must decode to the table's columns.
    let ipc = tables[0].column(4).as_binary::<i32>().value(0).to_vec();
    let schema = arrow::ipc::convert::try_schema_from_ipc_buffer(&ipc).unwrap();
    assert_eq!(
        schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect::<Vec<_>>(),
        vec!["id", "name"]
    );
    // 5. Queries: prepare returns the schema; GetFlightInfo + DoGet of the prepared query.
    let rows = jdbc_query(&mut c, &token, "SELECT id, name FROM default.j ORDER BY id").await;
    assert_eq!(strings(&rows, 1), vec!["a", "b"]);
    // 6. Parameters: DoPut of the prepared query with a parameter batch; the new handle is used.
    let (prepared, _) = prepare(&mut c, &token, "SELECT name FROM default.j WHERE id = $1")
        .await
        .unwrap();
    let rows = bind_and_fetch(
        &mut c,
        &token,
        prepared.prepared_statement_handle.clone(),
        2,
    )
    .await;
    assert_eq!(strings(&rows, 0), vec!["b"]);
    close(&mut c, &token, prepared.prepared_statement_handle).await;
    // A result type that depends on the bound value: FlightInfo's schema is planned with it.
    let (prepared, _) = prepare(&mut c, &token, "SELECT $1 AS x").await.unwrap();
    let rows = bind_and_fetch(
        &mut c,
        &token,
        prepared.prepared_statement_handle.clone(),
        5,
    )
    .await;
    assert_eq!(rows[0].schema().field(0).data_type(), &DataType::Int64);
    assert_eq!(strings(&rows, 0), vec!["5"]);
    // 7. Bad SQL: InvalidArgument at prepare, and the connection stays usable.
    let err = prepare(&mut c, &token, "SELEC nonsense").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let err = prepare(&mut c, &token, "SELECT * FROM default.missing")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let rows = jdbc_query(&mut c, &token, "SELECT count(*) FROM default.j").await;
    assert_eq!(strings(&rows, 0), vec!["2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_calls_are_refused() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let err = handshake(&mut c, "jdbc", "wrong").await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = handshake(&mut c, "nobody", "pw").await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    // No token at all, and a made-up token.
    let err = c
        .get_flight_info(Request::new(cmd(CommandGetCatalogs {})))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = c
        .get_flight_info(authed(cmd(CommandGetCatalogs {}), "forged"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    // A handle issued to one user is refused to another.
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    let (prepared, _) = prepare(&mut c, &token, "SELECT 1").await.unwrap();
    let rw = handshake(&mut c, "rw", "pw").await.unwrap();
    let info = |handle: bytes::Bytes| {
        cmd(CommandPreparedStatementQuery {
            prepared_statement_handle: handle,
        })
    };
    // One byte changed: not a handle this deployment issued.
    let mut forged = prepared.prepared_statement_handle.to_vec();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let err = c
        .get_flight_info(authed(info(forged.into()), &token))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    // Genuine, but issued to another user.
    let err = c
        .get_flight_info(authed(
            info(prepared.prepared_statement_handle.clone()),
            &rw,
        ))
        .await
        .unwrap_err();
    assert!(err.message().contains("another principal"), "{err}");
    assert_eq!(err.code(), Code::PermissionDenied);
    server.stop().await;
}

/// The administrative actions through DoAction with tidelake's messages: each works on a real
/// table, ListActions describes it, and bad arguments give a precise status and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions() {
    use tidelake_client::admin::*;
    let server = Server::start().await;
    let mut c = server.client().await;
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    jdbc_update(&mut c, &token, "CREATE TABLE t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '2', 'write-only' = 'true')").await;
    for i in 0..4 {
        jdbc_update(
            &mut c,
            &token,
            &format!("INSERT INTO t VALUES ({i}, 'v{i}'), ({}, 'w')", i + 10),
        )
        .await;
    }
    let listed: Vec<String> = c
        .list_actions(authed(arrow_flight::Empty {}, &token))
        .await
        .unwrap()
        .into_inner()
        .map(|a| a.unwrap().r#type)
        .collect()
        .await;
    for (name, _) in tidelake::server::admin::ADMIN_ACTIONS {
        assert!(listed.iter().any(|l| l == name), "{name} not listed");
    }
    let one = |r: Result<Vec<Vec<u8>>, tonic::Status>| {
        let mut r = r.unwrap();
        assert_eq!(r.len(), 1);
        r.remove(0)
    };

    // Table info: 4 snapshots, 8 rows in level-0 files of 2 buckets.
    let info_req = TableInfoRequest { table: "t".into() }.encode_to_vec();
    let info = TableInfo::decode(
        one(action(&mut c, &token, "tidelake.table_info", info_req.clone()).await).as_slice(),
    )
    .unwrap();
    assert_eq!(info.table, "default.t");
    assert_eq!(info.latest_snapshot_id, 4);
    assert_eq!(info.total_rows, 8);
    assert_eq!(info.buckets.len(), 2);
    assert!(info
        .buckets
        .iter()
        .all(|b| b.sorted_runs == b.files && b.files > 1));

    // Full compaction: one run per bucket after it.
    let req = CompactRequest {
        table: "default.t".into(),
        full: true,
        partitions: vec![],
        ..Default::default()
    };
    let r = CompactResult::decode(
        one(action(&mut c, &token, "tidelake.compact", req.encode_to_vec()).await).as_slice(),
    )
    .unwrap();
    assert_eq!((r.buckets_compacted, r.snapshot_id), (2, 5));
    assert_eq!(
        r.files_before,
        info.buckets.iter().map(|b| b.files).sum::<i64>()
    );
    let info = TableInfo::decode(
        one(action(&mut c, &token, "tidelake.table_info", info_req.clone()).await).as_slice(),
    )
    .unwrap();
    assert!(info.buckets.iter().all(|b| b.sorted_runs == 1), "{info:?}");
    assert_eq!(info.total_rows, 8);

    // Tags and rollback.
    let tag = |name: &str, snapshot: Option<i64>| {
        TagRequest {
            table: "t".into(),
            tag: name.into(),
            snapshot_id: snapshot,
        }
        .encode_to_vec()
    };
    let tags = TagList::decode(
        one(action(
            &mut c,
            &token,
            "tidelake.create_tag",
            tag("before", Some(2)),
        )
        .await)
        .as_slice(),
    )
    .unwrap();
    assert_eq!(
        tags.tags
            .iter()
            .map(|t| (t.name.as_str(), t.snapshot_id))
            .collect::<Vec<_>>(),
        vec![("before", 2)]
    );
    let err = action(&mut c, &token, "tidelake.create_tag", tag("before", None))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists, "{err}");
    let err = action(&mut c, &token, "tidelake.rollback", tag("", Some(99)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let rolled = CleanupResult::decode(
        one(action(&mut c, &token, "tidelake.rollback", tag("before", None)).await).as_slice(),
    )
    .unwrap();
    assert_eq!(rolled.snapshots, vec![5, 4, 3]);
    let info = TableInfo::decode(
        one(action(&mut c, &token, "tidelake.table_info", info_req.clone()).await).as_slice(),
    )
    .unwrap();
    assert_eq!((info.latest_snapshot_id, info.total_rows), (2, 4));
    let listed = TagList::decode(
        one(action(&mut c, &token, "tidelake.list_tags", tag("", None)).await).as_slice(),
    )
    .unwrap();
    assert_eq!(listed.tags.len(), 1);
    one(action(&mut c, &token, "tidelake.delete_tag", tag("before", None)).await);

    // Expiry and orphan files (dry run lists, nothing is deleted).
    let exp = ExpireSnapshotsRequest {
        table: "t".into(),
        retain_min: Some(1),
        retain_max: Some(1),
        older_than: None,
        ..Default::default()
    };
    let r = CleanupResult::decode(
        one(action(
            &mut c,
            &token,
            "tidelake.expire_snapshots",
            exp.encode_to_vec(),
        )
        .await)
        .as_slice(),
    )
    .unwrap();
    assert_eq!(r.snapshots, vec![1]);
    let orphans = RemoveOrphanFilesRequest {
        table: "t".into(),
        older_than: Some("0 ms".into()),
        delete: false,
        ..Default::default()
    };
    let r = CleanupResult::decode(
        one(action(
            &mut c,
            &token,
            "tidelake.remove_orphan_files",
            orphans.encode_to_vec(),
        )
        .await)
        .as_slice(),
    )
    .unwrap();
    assert!(
        r.files
            .iter()
            .all(|f| f.contains("bucket-") || f.contains("manifest")),
        "{r:?}"
    );

    // ALTER TABLE through the action; the result is the table's new info.
    let alter = AlterTableRequest {
        table: "t".into(),
        changes: "ADD COLUMN n INT".into(),
    };
    let info = TableInfo::decode(
        one(action(
            &mut c,
            &token,
            "tidelake.alter_table",
            alter.encode_to_vec(),
        )
        .await)
        .as_slice(),
    )
    .unwrap();
    assert_eq!(info.schema_id, 1);
    assert!(info.schema_json.contains("\"n\""));

    // Bad arguments: precise statuses, nothing changed.
    let bad = |table: &str| {
        TableInfoRequest {
            table: table.into(),
        }
        .encode_to_vec()
    };
    assert_eq!(
        action(&mut c, &token, "tidelake.table_info", bad("nope"))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        action(&mut c, &token, "tidelake.table_info", bad(""))
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    assert_eq!(
        action(&mut c, &token, "tidelake.compact", vec![0xff, 0xff])
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let alter = AlterTableRequest {
        table: "t".into(),
        changes: "DROP COLUMN id".into(),
    };
    let err = action(
        &mut c,
        &token,
        "tidelake.alter_table",
        alter.encode_to_vec(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Cannot drop partition key or primary key: [id]"),
        "{err}"
    );
    let req = CompactRequest {
        table: "t".into(),
        full: false,
        partitions: vec!["dt=1".into()],
        ..Default::default()
    };
    assert_eq!(
        action(&mut c, &token, "tidelake.compact", req.encode_to_vec())
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    assert_eq!(
        action(&mut c, &token, "tidelake.nothing", vec![])
            .await
            .unwrap_err()
            .code(),
        Code::Unimplemented
    );
    let info = TableInfo::decode(
        one(action(&mut c, &token, "tidelake.table_info", info_req).await).as_slice(),
    )
    .unwrap();
    assert_eq!((info.schema_id, info.total_rows), (1, 4));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_admin_actions_stream_progress_and_are_listed_and_cancelled() {
    use tidelake_client::admin::*;
    let server = Server::start().await;
    let mut c = server.client().await;
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    jdbc_update(&mut c, &token, "CREATE TABLE p (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '4', 'write-only' = 'true')").await;
    for i in 0..3 {
        let values: Vec<String> = (0..40).map(|k| format!("({k}, 'v{i}')")).collect();
        jdbc_update(
            &mut c,
            &token,
            &format!("INSERT INTO p VALUES {}", values.join(", ")),
        )
        .await;
    }
    // With report_progress: Any-wrapped OperationProgress messages, then the Any-wrapped result.
    let req = CompactRequest {
        table: "p".into(),
        full: true,
        report_progress: true,
        ..Default::default()
    };
    let bodies = action(&mut c, &token, "tidelake.compact", req.encode_to_vec())
        .await
        .unwrap();
    let anys: Vec<Any> = bodies
        .iter()
        .map(|b| Any::decode(b.as_slice()).unwrap())
        .collect();
    let (last, progress) = anys.split_last().unwrap();
    assert_eq!(last.type_url, type_url("CompactResult"));
    let result = CompactResult::decode(last.value.as_ref()).unwrap();
    assert_eq!(result.buckets_compacted, 4);
    assert!(!progress.is_empty());
    let progress: Vec<OperationProgress> = progress
        .iter()
        .map(|a| {
            assert_eq!(a.type_url, type_url("OperationProgress"));
            OperationProgress::decode(a.value.as_ref()).unwrap()
        })
        .collect();
    let id = &progress[0].operation_id;
    assert_eq!(id.len(), 36, "a uuid names the operation");
    assert!(progress.iter().all(|p| &p.operation_id == id));
    let final_ = progress.last().unwrap();
    assert_eq!((final_.phase.as_str(), final_.done), ("committing", 1));
    assert!(final_.files >= 4 && final_.bytes > 0, "{final_:?}");

    // Nothing runs now; cancelling a finished (or unknown) operation is NotFound.
    let list = OperationList::decode(
        action(&mut c, &token, "tidelake.list_operations", vec![])
            .await
            .unwrap()[0]
            .as_slice(),
    )
    .unwrap();
    assert!(list.operations.is_empty(), "{list:?}");
    let cancel = OperationRequest {
        operation_id: id.clone(),
    };
    let err = action(&mut c, &token, "tidelake.cancel", cancel.encode_to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");

    // Progress on expiry and orphan removal too, ending with their CleanupResult.
    for (name, body) in [
        (
            "tidelake.expire_snapshots",
            ExpireSnapshotsRequest {
                table: "p".into(),
                retain_min: Some(1),
                retain_max: Some(1),
                report_progress: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "tidelake.remove_orphan_files",
            RemoveOrphanFilesRequest {
                table: "p".into(),
                older_than: Some("0 ms".into()),
                report_progress: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    ] {
        let bodies = action(&mut c, &token, name, body).await.unwrap();
        let last = Any::decode(bodies.last().unwrap().as_slice()).unwrap();
        assert_eq!(last.type_url, type_url("CleanupResult"), "{name}");
        let r = CleanupResult::decode(last.value.as_ref()).unwrap();
        if name == "tidelake.expire_snapshots" {
            assert_eq!(r.snapshots, vec![1, 2, 3], "{name}");
        }
        assert!(bodies.len() >= 2, "{name}: progress before the result");
    }
}

/// Runs one statement as an ad-hoc update (CommandStatementUpdate); its count or status.
async fn try_update(
    c: &mut FlightServiceClient<Channel>,
    token: &str,
    sql: &str,
) -> Result<i64, tonic::Status> {
    let body = put(
        c,
        token,
        cmd(arrow_flight::sql::CommandStatementUpdate {
            query: sql.to_string(),
            transaction_id: None,
        }),
        Schema::empty(),
        vec![],
    )
    .await?;
    Ok(DoPutUpdateResult::decode(body.as_slice())
        .unwrap()
        .record_count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_are_checked_at_every_door() {
    use tidelake_client::admin::*;
    let server = Server::start().await;
    let mut c = server.client().await;
    let admin = handshake(&mut c, "jdbc", "pw").await.unwrap();
    let reader = handshake(&mut c, "ro", "pw").await.unwrap();
    let writer = handshake(&mut c, "rw", "pw").await.unwrap();
    try_update(
        &mut c,
        &admin,
        "CREATE TABLE r (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')",
    )
    .await
    .unwrap();
    let denied = |r: Result<i64, tonic::Status>, what: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{what}: {e}");
        e.message().to_string()
    };
    // SQL: readers query, writers also write, only admins change definitions or run procedures.
    let m = denied(
        try_update(&mut c, &reader, "INSERT INTO r VALUES (1, 'a')").await,
        "reader INSERT",
    );
    assert_eq!(
        m,
        "INSERT needs the writer role; this user has the reader role"
    );
    assert_eq!(
        try_update(&mut c, &writer, "INSERT INTO r VALUES (1, 'a')")
            .await
            .unwrap(),
        1
    );
    try_update(&mut c, &writer, "UPDATE r SET v = 'b' WHERE id = 1")
        .await
        .unwrap();
    for sql in [
        "CREATE TABLE r2 (id BIGINT)",
        "ALTER TABLE r ADD COLUMN w INT",
        "DROP TABLE r",
        "CALL sys.compact('default.r')",
    ] {
        let m = denied(try_update(&mut c, &writer, sql).await, sql);
        assert!(m.contains("needs the admin role"), "{sql}: {m}");
    }
    let rows = jdbc_query(&mut c, &reader, "SELECT v FROM r").await;
    assert_eq!(strings(&rows, 0), vec!["b"]);
    // Actions: reading ones for everyone, the others for admins.
    let info = TableInfoRequest { table: "r".into() }.encode_to_vec();
    assert!(action(&mut c, &reader, "tidelake.table_info", info)
        .await
        .is_ok());
    let compact = CompactRequest {
        table: "r".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let e = action(&mut c, &writer, "tidelake.compact", compact.clone())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    assert_eq!(
        e.message(),
        "tidelake.compact needs the admin role; this user has the writer role"
    );
    assert!(action(&mut c, &admin, "tidelake.compact", compact)
        .await
        .is_ok());
    // Bulk ingest: appending is writing, creating a table is administering.
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]);
    let batch = RecordBatch::try_new(
        std::sync::Arc::new(schema.clone()),
        vec![
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![2])),
            std::sync::Arc::new(arrow::array::StringArray::from(vec!["c"])),
        ],
    )
    .unwrap();
    let ingest = |table: &str, create: bool| {
        use arrow_flight::sql::{TableExistsOption, TableNotExistOption};
        cmd(arrow_flight::sql::CommandStatementIngest {
            table_definition_options: Some(arrow_flight::sql::TableDefinitionOptions {
                if_not_exist: if create {
                    TableNotExistOption::Create
                } else {
                    TableNotExistOption::Fail
                } as i32,
                if_exists: TableExistsOption::Append as i32,
            }),
            table: table.to_string(),
            ..Default::default()
        })
    };
    let e = put(
        &mut c,
        &writer,
        ingest("fresh", true),
        schema.clone(),
        vec![batch.clone()],
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    let e = put(
        &mut c,
        &reader,
        ingest("r", false),
        schema.clone(),
        vec![batch.clone()],
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    put(&mut c, &writer, ingest("r", false), schema, vec![batch])
        .await
        .unwrap();
    let rows = jdbc_query(&mut c, &reader, "SELECT id FROM r ORDER BY id").await;
    assert_eq!(strings(&rows, 0), vec!["1", "2"]);
    // Nothing a refused call asked for happened.
    let tables = jdbc_query(&mut c, &reader, "SHOW TABLES").await;
    let last = tables[0].num_columns() - 1;
    let names = strings(&tables, last);
    assert!(names.iter().any(|n| n == "r"), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "fresh" || n == "r2"),
        "{names:?}"
    );
}

/// Every occurrence of `from` (as a little-endian i64) inside `bytes[range]`, one at a time,
/// replaced by `to`.
fn forgeries(bytes: &[u8], range: std::ops::Range<usize>, from: i64, to: i64) -> Vec<Vec<u8>> {
    let needle = from.to_le_bytes();
    range
        .filter(|&i| bytes.get(i..i + 8) == Some(&needle[..]))
        .map(|i| {
            let mut forged = bytes.to_vec();
            forged[i..i + 8].copy_from_slice(&to.to_le_bytes());
            forged
        })
        .collect()
}

/// Sizes claimed by a request (IPC body and buffer lengths of bound parameters, 4 EiB or
/// negative) are checked against the bytes received: InvalidArgument, and the server answers on.
#[tokio::test]
async fn forged_ipc_lengths_in_parameters_are_refused() {
    use base64::Engine;
    let server = Server::start().await;
    let mut c = server.client().await;
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    // 1000 Int64 values: the body and the data buffer are both 8000 bytes, a value found
    // nowhere else in the stream's headers.
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new("$1", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        std::sync::Arc::clone(&schema),
        vec![std::sync::Arc::new(
            arrow::array::Int64Array::from_iter_values(0..1000),
        )],
    )
    .unwrap();
    let mut stream = Vec::new();
    {
        let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut stream, &schema).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
    }
    let header_end = stream.len() - 8000 - 8;
    let mut tried = 0;
    for claim in [1i64 << 62, -8] {
        for forged in forgeries(&stream, 0..header_end, 8000, claim) {
            let handle = serde_json::json!({
                "sql": "SELECT $1",
                "params": base64::engine::general_purpose::STANDARD.encode(&forged),
            });
            let ticket = arrow_flight::sql::TicketStatementQuery {
                statement_handle: serde_json::to_vec(&handle).unwrap().into(),
            };
            let ticket = arrow_flight::Ticket::new(ticket.as_any().encode_to_vec());
            let err = match c.do_get(authed(ticket, &token)).await {
                Ok(resp) => resp
                    .into_inner()
                    .try_collect::<Vec<_>>()
                    .await
                    .expect_err("a forged parameter stream is refused"),
                Err(e) => e,
            };
            // A ticket the client made is refused before its parameters are looked at.
            assert_eq!(err.code(), Code::Unauthenticated, "{claim}: {err}");
            assert_eq!(err.message(), "not a ticket this deployment issued");
            tried += 1;
        }
    }
    assert!(tried >= 4, "both lengths forged both ways ({tried})");

    // The same lies in a DoPut of parameters.
    let (prepared, _) = prepare(&mut c, &token, "SELECT $1").await.unwrap();
    let descriptor = cmd(CommandPreparedStatementQuery {
        prepared_statement_handle: prepared.prepared_statement_handle.clone(),
    });
    let messages: Vec<arrow_flight::FlightData> =
        arrow_flight::encode::FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(descriptor))
            .build(futures::stream::iter([Ok(batch)]))
            .try_collect()
            .await
            .unwrap();
    let data = messages.last().unwrap();
    let mut refused = 0;
    for claim in [1i64 << 62, -8] {
        let header = data.data_header.to_vec();
        for forged in forgeries(&header, 0..header.len(), 8000, claim) {
            let mut msgs = messages.clone();
            msgs.last_mut().unwrap().data_header = forged.into();
            let result = match c.do_put(authed(futures::stream::iter(msgs), &token)).await {
                Ok(resp) => resp.into_inner().try_collect::<Vec<_>>().await.map(|_| ()),
                Err(e) => Err(e),
            };
            // The buffer length is checked; the body length a DoPut message claims is unused.
            if let Err(e) = result {
                assert_eq!(e.code(), Code::InvalidArgument, "{claim}: {e}");
                refused += 1;
            }
        }
    }
    assert!(refused >= 2, "forged buffer lengths refused ({refused})");
    // Still serving.
    let (prepared, _) = prepare(&mut c, &token, "SELECT 1").await.unwrap();
    let rows = fetch(
        &mut c,
        &token,
        cmd(CommandPreparedStatementQuery {
            prepared_statement_handle: prepared.prepared_statement_handle,
        }),
    )
    .await;
    assert_eq!(rows[0].num_rows(), 1);
    server.stop().await;
}

/// The retention numbers mean the same at every door (CLI, `CALL sys.*`, Flight action): Paimon's
/// rule, counts below 1 and `retain_max` below `retain_min` refused with one message, and a valid
/// request expiring the same snapshots.
#[tokio::test]
async fn retention_numbers_mean_the_same_at_every_door() {
    use tidelake_client::admin::*;
    let server = Server::start().await;
    let warehouse = server._scratch.path().to_string();
    let mut c = server.client().await;
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    try_update(
        &mut c,
        &token,
        "CREATE TABLE r (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1', \
         'snapshot.num-retained.min' = '1', 'snapshot.num-retained.max' = '100', \
         'snapshot.time-retained' = '1 d', 'num-sorted-run.compaction-trigger' = '100')",
    )
    .await
    .unwrap();
    for i in 0..6 {
        try_update(&mut c, &token, &format!("INSERT INTO r VALUES ({i}, 'x')"))
            .await
            .unwrap();
    }
    let snapshots = |c: &mut FlightServiceClient<Channel>| {
        let mut c = c.clone();
        let token = token.clone();
        async move {
            let rows = jdbc_query(&mut c, &token, "SELECT count(*) FROM \"r$snapshots\"").await;
            rows[0]
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .unwrap()
                .value(0)
        }
    };
    assert_eq!(snapshots(&mut c).await, 6);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidelake"))
            .arg("--warehouse")
            .arg(&warehouse)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let flight = |c: &mut FlightServiceClient<Channel>, req: ExpireSnapshotsRequest| {
        let mut c = c.clone();
        let token = token.clone();
        async move {
            action(
                &mut c,
                &token,
                "tidelake.expire_snapshots",
                req.encode_to_vec(),
            )
            .await
        }
    };
    for (retain_max, retain_min, message) in [
        (Some(0), None, "retain_max must be at least 1 (got 0)"),
        (None, Some(0), "retain_min must be at least 1 (got 0)"),
        (
            Some(2),
            Some(3),
            "retain_max (2) must not be below retain_min (3)",
        ),
    ] {
        let null = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
        let sql = format!(
            "CALL sys.expire_snapshots('r', {}, {})",
            null(retain_max),
            null(retain_min)
        );
        let e = try_update(&mut c, &token, &sql).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{sql}: {e}");
        assert!(e.message().contains(message), "{sql}: {}", e.message());
        let req = ExpireSnapshotsRequest {
            table: "r".into(),
            retain_max,
            retain_min,
            ..Default::default()
        };
        let e = flight(&mut c, req).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "action: {e}");
        assert!(e.message().contains(message), "action: {}", e.message());
        let mut args = vec!["expire".to_string(), "default.r".to_string()];
        if let Some(v) = retain_max {
            args.extend(["--retain-max".to_string(), v.to_string()]);
        }
        if let Some(v) = retain_min {
            args.extend(["--retain-min".to_string(), v.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, stderr) = cli(&args);
        assert!(!ok, "CLI accepted {args:?}");
        assert_eq!(stderr.trim(), format!("error: {message}"), "CLI {args:?}");
        assert_eq!(
            snapshots(&mut c).await,
            6,
            "a refused request changed nothing"
        );
    }
    // Valid requests: each door keeps the newest retain_max snapshots (all are younger than the
    // table's 'snapshot.time-retained', so the count alone decides).
    let (ok, stdout, stderr) = cli(&["expire", "default.r", "--retain-max", "5"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("expired 1 snapshot(s) [1] of default.r"),
        "{stdout}"
    );
    assert_eq!(snapshots(&mut c).await, 5);
    let n = try_update(&mut c, &token, "CALL sys.expire_snapshots('r', 4, 1)")
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(snapshots(&mut c).await, 4);
    let req = ExpireSnapshotsRequest {
        table: "r".into(),
        retain_max: Some(3),
        ..Default::default()
    };
    let body = flight(&mut c, req).await.unwrap();
    let result = CleanupResult::decode(body[0].as_slice()).unwrap();
    assert_eq!(result.snapshots, vec![3]);
    assert_eq!(snapshots(&mut c).await, 3);
    server.stop().await;
}

/// A prepared INSERT, UPDATE or DELETE with `?` / `$n` parameters says what it binds (the JDBC
/// driver reads the parameter schema to bind), and stays an update (empty dataset schema).
#[tokio::test]
async fn prepared_updates_return_their_parameter_schema() {
    use arrow::datatypes::DataType;
    let server = Server::start().await;
    let mut c = server.client().await;
    let token = handshake(&mut c, "jdbc", "pw").await.unwrap();
    try_update(
        &mut c,
        &token,
        "CREATE TABLE p (id BIGINT NOT NULL, v STRING, n INT, PRIMARY KEY (id)) WITH ('bucket' = '1')",
    )
    .await
    .unwrap();
    for (sql, want) in [
        (
            "INSERT INTO p VALUES (?, ?, ?)",
            vec![DataType::Int64, DataType::Utf8, DataType::Int32],
        ),
        (
            "UPDATE p SET v = $1 WHERE id = $2",
            vec![DataType::Utf8, DataType::Int64],
        ),
        ("DELETE FROM p WHERE n = ?", vec![DataType::Int32]),
        ("INSERT INTO p VALUES (1, 'a', 2)", vec![]),
    ] {
        let (result, is_update) = prepare(&mut c, &token, sql).await.unwrap();
        assert!(is_update, "{sql}");
        assert!(result.dataset_schema.is_empty(), "{sql}");
        let types: Vec<DataType> = if result.parameter_schema.is_empty() {
            vec![]
        } else {
            let schema =
                arrow::ipc::convert::try_schema_from_ipc_buffer(&result.parameter_schema).unwrap();
            schema
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect()
        };
        assert_eq!(types, want, "{sql}");
    }
    server.stop().await;
}
