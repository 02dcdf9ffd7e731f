//! Every parser of bytes that come from storage or the network, fed arbitrary and mutated bytes:
//! snapshot and schema JSON (through the managers that read them), manifest and manifest-list
//! Avro, BinaryRow, Parquet data files, sealed tickets, changelog tickets and Flight commands.
//! Each returns an error or a value, never panics. (The nightly script runs these with more cases.)

use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use proptest::prelude::*;
use prost::Message;
use serde_json::json;
use tidelake::io::FileIo;
use tidelake::spec::DataType;
use tidelake::{Catalog, Identifier};

fn cases(default: u32) -> u32 {
    std::env::var("TIDELAKE_PARSER_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `bytes` with some bytes replaced, dropped or the tail cut, as chosen by `edits`.
fn mutate(bytes: &[u8], edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for &(at, how, value) in edits {
        if out.is_empty() {
            out.push(value);
            continue;
        }
        let i = at % out.len();
        match how % 4 {
            0 => out[i] = value,
            1 => {
                out.remove(i);
            }
            2 => out.insert(i, value),
            _ => out.truncate(i),
        }
    }
    out
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)
}

/// A table in memory with a few commits; its store, and the paths of its files by kind.
struct Seeded {
    store: Arc<InMemory>,
    rt: tokio::runtime::Runtime,
    files: Vec<(String, Vec<u8>)>,
}

fn seeded() -> Seeded {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::new(InMemory::new());
    let files = rt.block_on(async {
        let catalog = Catalog::new(FileIo::from_store(Arc::clone(&store) as _, "memory://"));
        catalog.create_database("db", true).await.unwrap();
        let def = tidelake::TableDefinition {
            columns: tidelake::TableDefinition::parse_columns(
                "id BIGINT NOT NULL, v STRING, d DATE",
            )
            .unwrap(),
            primary_keys: vec!["id".into()],
            partition_keys: vec![],
            options: [("bucket".to_string(), "1".to_string())]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let t = catalog
            .create_table(&Identifier::new("db", "t"), &def, false)
            .await
            .unwrap();
        for i in 0..2 {
            crate::common::write_rows(&t, &[json!({"id": i, "v": "x", "d": 19000})]).await;
        }
        let mut files = Vec::new();
        let mut list = store.list(None);
        use futures::StreamExt;
        while let Some(m) = list.next().await {
            let m = m.unwrap();
            let bytes = store.get(&m.location).await.unwrap().bytes().await.unwrap();
            files.push((m.location.to_string(), bytes.to_vec()));
        }
        files
    });
    Seeded { store, rt, files }
}

impl Seeded {
    fn file(&self, part: &str) -> (String, Vec<u8>) {
        self.files
            .iter()
            .find(|(p, _)| p.contains(part))
            .cloned()
            .unwrap_or_else(|| panic!("no file matching {part}"))
    }

    /// Replaces `path` with `bytes`, then loads the table and reads it at every snapshot, with a
    /// fresh FileIo (nothing cached); restores the file afterwards.
    fn read_with(&self, path: &str, original: &[u8], bytes: Vec<u8>) {
        self.rt.block_on(async {
            let p = Path::from(path);
            self.store.put(&p, bytes.into()).await.unwrap();
            let catalog = Catalog::new(FileIo::from_store(
                Arc::clone(&self.store) as _,
                "memory://",
            ));
            if let Ok(t) = catalog.load_table(&Identifier::new("db", "t")).await {
                let sm = t.snapshot_manager();
                let _ = sm.latest().await;
                for id in 1..=3 {
                    let _ = sm.try_snapshot(id).await;
                    let _ = t
                        .read_all(tidelake::table::SnapshotSelector::Id(id), None)
                        .await;
                }
                let _ = t
                    .read_all(tidelake::table::SnapshotSelector::Latest, None)
                    .await;
            }
            self.store
                .put(&p, Bytes::copy_from_slice(original).into())
                .await
                .unwrap();
        });
    }
}

thread_local! {
    static SEEDED: Seeded = seeded();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn snapshot_json_mutations_are_errors_not_panics(e in edits()) {
        SEEDED.with(|s| {
            let (path, original) = s.file("snapshot/snapshot-2");
            s.read_with(&path, &original, mutate(&original, &e));
        });
    }

    #[test]
    fn schema_json_mutations_are_errors_not_panics(e in edits()) {
        SEEDED.with(|s| {
            let (path, original) = s.file("schema/schema-0");
            s.read_with(&path, &original, mutate(&original, &e));
        });
    }

    #[test]
    fn manifest_mutations_are_errors_not_panics(e in edits()) {
        SEEDED.with(|s| {
            let (path, original) = s.file("manifest/manifest-");
            let mutated = mutate(&original, &e);
            let _ = tidelake::spec::manifest::decode_manifest(&mutated);
            let _ = tidelake::spec::manifest::decode_manifest_list(&mutated);
            if !path.contains("manifest-list") {
                s.read_with(&path, &original, mutated);
            }
        });
    }

    #[test]
    fn manifest_list_mutations_are_errors_not_panics(e in edits()) {
        SEEDED.with(|s| {
            let (path, original) = s.file("manifest/manifest-list-");
            s.read_with(&path, &original, mutate(&original, &e));
        });
    }

    #[test]
    fn data_file_mutations_are_errors_not_panics(e in edits()) {
        SEEDED.with(|s| {
            let (path, original) = s.file("bucket-0/data-");
            let mutated = mutate(&original, &e);
            let schema = Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            ]));
            let _ = tidelake::table::data_file::decode(&path, Bytes::from(mutated.clone()), &schema);
            s.read_with(&path, &original, mutated);
        });
    }

    #[test]
    fn avro_decoders_take_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = tidelake::spec::manifest::decode_manifest(&bytes);
        let _ = tidelake::spec::manifest::decode_manifest_list(&bytes);
    }

    #[test]
    fn binary_rows_take_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..128), arity in 0usize..6) {
        let all = [
            "BIGINT".parse::<DataType>().unwrap(),
            "STRING".parse::<DataType>().unwrap(),
            "DECIMAL(20, 2)".parse::<DataType>().unwrap(),
            "TIMESTAMP(9)".parse::<DataType>().unwrap(),
            "BYTES".parse::<DataType>().unwrap(),
            "INT".parse::<DataType>().unwrap(),
        ];
        let _ = tidelake::spec::binary_row::deserialize(&bytes, &all[..arity]);
        let _ = tidelake::spec::binary_row::arity(&bytes);
    }

    #[test]
    fn tickets_and_commands_take_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = tidelake::server::subscription::parse_ticket(&bytes);
        let any = arrow_flight::sql::Any {
            type_url: tidelake::server::streaming::TYPE_URL.to_string(),
            value: bytes.clone().into(),
        };
        let _ = tidelake::server::streaming::parse_command(&any);
        let wrapped = arrow_flight::sql::Any {
            type_url: "type.googleapis.com/tidelake.ChangelogTicket".to_string(),
            value: bytes.clone().into(),
        }
        .encode_to_vec();
        let _ = tidelake::server::subscription::parse_ticket(&wrapped);
        let _ = tidelake_client::proto::WritePosition::decode(bytes.as_slice());
        let _ = arrow_flight::sql::Any::decode(bytes.as_slice()).map(arrow_flight::sql::Command::try_from);
        let owner = tidelake::server::seal::Owner { tenant: "t", issuer: "i", subject: "s" };
        let _ = tidelake::server::seal::open(&[7u8; 32], tidelake::server::seal::Kind::Ticket, owner, 0, &bytes);
    }
}
