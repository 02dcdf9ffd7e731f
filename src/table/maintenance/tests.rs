//! The plans checked against a model table: a history of commits (appends and compactions,
//! manifests merged now and then, changelog files, index manifests) kept as plain maps, a store
//! that is a set of paths, and the same loading the real planners do, read off the model. For
//! every prefix of every plan (a run stopped after any step), every remaining snapshot and tag
//! reads completely, a second run finishes the job, and what is left over is only orphans:
//! removing them gives exactly what an uninterrupted run leaves.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use serde_json::json;

use super::expire_snapshots::{self, ExpiryInput};
use super::orphans::{self, Used};
use super::plan::{Plan, Step};
use super::references::{DataFile, Entry, FileLayout, Held, SnapshotFiles};
use super::rollback::{self, RollbackInput};
use super::tags::{self, TagDeletion};
use crate::error::Result;
use crate::io::FileStatus;
use crate::spec::manifest::FileKind;
use crate::spec::Snapshot;

const ROOT: &str = "t";

/// Where the model keeps its files (the table layout, relative to the warehouse).
struct Layout;

impl FileLayout for Layout {
    fn data_path(&self, f: &DataFile) -> Result<String> {
        Ok(format!("{ROOT}/bucket-{}/{}", f.bucket, f.name))
    }
    fn manifest_path(&self, name: &str) -> String {
        format!("{ROOT}/manifest/{name}")
    }
}

fn snapshot_path(id: i64) -> String {
    format!("{ROOT}/snapshot/snapshot-{id}")
}

fn tag_path(name: &str) -> String {
    format!("{ROOT}/tag/tag-{name}")
}

/// One commit of the generated history.
#[derive(Debug, Clone)]
struct Commit {
    /// New files written (appends, or a compaction's output).
    adds: usize,
    /// Which live files the commit replaces (indexes into the live set, modulo its size).
    deletes: Vec<usize>,
    bucket: i32,
    /// A changelog file beside the data.
    changelog: bool,
    /// The manifests are merged into one base manifest.
    merge_manifests: bool,
    /// A new index manifest (with a new index file) replaces the previous one.
    new_index: bool,
}

fn commit() -> impl Strategy<Value = Commit> {
    (
        0..3usize,
        prop::collection::vec(0..16usize, 0..3),
        0..2i32,
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(adds, deletes, bucket, changelog, merge_manifests, new_index)| Commit {
                adds: adds.max(usize::from(deletes.is_empty())),
                deletes,
                bucket,
                changelog,
                merge_manifests,
                new_index,
            },
        )
}

/// A table as plain maps: what every file holds, and which files exist.
#[derive(Debug, Clone, Default)]
struct Model {
    snapshots: BTreeMap<i64, Snapshot>,
    /// Manifest list -> manifests.
    lists: HashMap<String, Vec<String>>,
    /// Manifest -> entries.
    manifests: HashMap<String, Vec<Entry>>,
    /// Index manifest -> index file paths.
    index: HashMap<String, Vec<String>>,
    tags: BTreeMap<String, i64>,
    /// The paths that exist.
    store: BTreeSet<String>,
    /// Snapshots a rollback published again from a tag: a tag does not keep its snapshot's
    /// changelog, so these are read whole without one.
    restored: BTreeSet<i64>,
    /// What the `EARLIEST` hint says.
    earliest_hint: Option<i64>,
}

fn data_file(bucket: i32, name: String) -> DataFile {
    DataFile {
        partition: vec![],
        bucket,
        name,
    }
}

fn entry(kind: FileKind, file: &DataFile, appended: bool) -> Entry {
    Entry {
        kind,
        file: file.clone(),
        appended,
    }
}

fn snapshot(id: i64, changelog: bool, index: Option<&String>) -> Snapshot {
    serde_json::from_value(json!({
        "version": 3, "id": id, "schemaId": 0,
        "baseManifestList": format!("base-{id}"), "deltaManifestList": format!("delta-{id}"),
        "changelogManifestList": changelog.then(|| format!("cl-{id}")),
        "indexManifest": index,
        "commitUser": "u", "commitIdentifier": id, "commitKind": "APPEND", "timeMillis": id,
        "uuid": format!("uuid-{id}"),
    }))
    .unwrap()
}

impl Model {
    fn build(commits: &[Commit], tagged: &[usize]) -> Self {
        let mut m = Model::default();
        let mut live: BTreeSet<DataFile> = BTreeSet::new();
        let mut base: Vec<String> = Vec::new();
        let mut index: Option<String> = None;
        for (i, c) in commits.iter().enumerate() {
            let id = i as i64 + 1;
            let mut entries = Vec::new();
            let current: Vec<DataFile> = live.iter().cloned().collect();
            let mut deleted = BTreeSet::new();
            for d in &c.deletes {
                if !current.is_empty() {
                    deleted.insert(current[d % current.len()].clone());
                }
            }
            for f in &deleted {
                entries.push(entry(FileKind::Delete, f, true));
                live.remove(f);
            }
            let compaction = !deleted.is_empty();
            for k in 0..c.adds {
                let f = data_file(c.bucket, format!("data-{id}-{k}.parquet"));
                m.store.insert(Layout.data_path(&f).unwrap());
                entries.push(entry(FileKind::Add, &f, !compaction));
                live.insert(f);
            }
            if c.merge_manifests && !base.is_empty() {
                // The live files before this commit, in one manifest.
                let merged = format!("merged-{id}");
                let before: Vec<Entry> = live
                    .iter()
                    .filter(|f| !entries.iter().any(|e| e.file == **f))
                    .chain(deleted.iter())
                    .map(|f| entry(FileKind::Add, f, true))
                    .collect();
                m.add_manifest(&merged, before);
                base = vec![merged];
            }
            m.add_list(&format!("base-{id}"), base.clone());
            let manifest = format!("m-{id}");
            m.add_manifest(&manifest, entries);
            m.add_list(&format!("delta-{id}"), vec![manifest.clone()]);
            base.push(manifest);
            if c.changelog {
                let f = data_file(c.bucket, format!("changelog-{id}.parquet"));
                m.store.insert(Layout.data_path(&f).unwrap());
                m.add_manifest(&format!("cm-{id}"), vec![entry(FileKind::Add, &f, true)]);
                m.add_list(&format!("cl-{id}"), vec![format!("cm-{id}")]);
            }
            if c.new_index {
                let name = format!("im-{id}");
                let file = format!("{ROOT}/index/index-{id}");
                m.store.insert(Layout.manifest_path(&name));
                m.store.insert(file.clone());
                m.index.insert(name.clone(), vec![file]);
                index = Some(name);
            }
            m.snapshots
                .insert(id, snapshot(id, c.changelog, index.as_ref()));
            m.store.insert(snapshot_path(id));
        }
        m.earliest_hint = Some(1);
        for (n, t) in tagged.iter().enumerate() {
            let id = (*t % commits.len()) as i64 + 1;
            let name = format!("t{n}");
            m.store.insert(tag_path(&name));
            m.tags.insert(name, id);
        }
        m
    }

    fn add_manifest(&mut self, name: &str, entries: Vec<Entry>) {
        self.store.insert(Layout.manifest_path(name));
        self.manifests.insert(name.to_string(), entries);
    }

    fn add_list(&mut self, name: &str, manifests: Vec<String>) {
        self.store.insert(Layout.manifest_path(name));
        self.lists.insert(name.to_string(), manifests);
    }

    fn has_manifest(&self, name: &str) -> bool {
        self.store.contains(&Layout.manifest_path(name))
    }

    /// The snapshot ids whose files exist.
    fn snapshot_ids(&self) -> Vec<i64> {
        self.snapshots
            .keys()
            .copied()
            .filter(|id| self.store.contains(&snapshot_path(*id)))
            .collect()
    }

    fn tags(&self) -> Vec<(String, i64)> {
        self.tags
            .iter()
            .filter(|(n, _)| self.store.contains(&tag_path(n)))
            .map(|(n, id)| (n.clone(), *id))
            .collect()
    }

    /// The entries of `list`, if it and all its manifests are there (as a real read).
    fn entries_of(&self, list: &str) -> Option<Vec<Entry>> {
        if !self.has_manifest(list) {
            return None;
        }
        let mut out = Vec::new();
        for m in &self.lists[list] {
            if !self.has_manifest(m) {
                return None;
            }
            out.extend(self.manifests[m].iter().cloned());
        }
        Some(out)
    }

    fn lists_of(s: &Snapshot) -> Vec<&String> {
        s.manifest_lists().collect()
    }

    /// [`SnapshotFiles::load`], read off the model.
    fn files_of(&self, s: &Snapshot) -> SnapshotFiles {
        SnapshotFiles {
            snapshot: s.clone(),
            lists: Self::lists_of(s)
                .into_iter()
                .map(|l| {
                    let names = self.has_manifest(l).then(|| self.lists[l].clone());
                    (l.clone(), names)
                })
                .collect(),
            delta: self.entries_of(&s.delta_manifest_list),
            changelog: s
                .changelog_manifest_list
                .as_ref()
                .and_then(|l| self.entries_of(l)),
            index_files: s
                .index_manifest
                .as_ref()
                .filter(|i| self.has_manifest(i))
                .map(|i| self.index[i].clone()),
        }
    }

    /// The live data files of `s` (its base and delta entries folded).
    fn live(&self, s: &Snapshot) -> BTreeSet<DataFile> {
        let mut live = BTreeSet::new();
        for list in [&s.base_manifest_list, &s.delta_manifest_list] {
            for m in &self.lists[list] {
                for e in &self.manifests[m] {
                    match e.kind {
                        FileKind::Add => live.insert(e.file.clone()),
                        FileKind::Delete => live.remove(&e.file),
                    };
                }
            }
        }
        live
    }

    /// [`Held::hold`], read off the model.
    fn hold(&self, held: &mut Held, s: &Snapshot) {
        held.files.extend(self.live(s));
        for l in [&s.base_manifest_list, &s.delta_manifest_list] {
            held.manifests.insert(l.clone());
            held.manifests.extend(self.lists[l].iter().cloned());
        }
        if let Some(i) = &s.index_manifest {
            held.manifests.insert(i.clone());
            held.index_files.extend(self.index[i].iter().cloned());
        }
    }

    /// Every file `s` needs to be read whole: its lists, manifests, data and index files, and,
    /// as a snapshot (`changelog`), its changelog files. A tag keeps what a batch read of it
    /// needs, not its snapshot's changelog files: those go with the snapshot, as in Paimon
    /// (`FileDeletionBase.manifestSkippingSet` holds data and index manifests only).
    fn needs(&self, s: &Snapshot, changelog: bool) -> Vec<String> {
        let mut out = Vec::new();
        let lists = [Some(&s.base_manifest_list), Some(&s.delta_manifest_list)]
            .into_iter()
            .chain([s.changelog_manifest_list.as_ref().filter(|_| changelog)])
            .flatten();
        for l in lists {
            out.push(Layout.manifest_path(l));
            for m in &self.lists[l] {
                out.push(Layout.manifest_path(m));
            }
        }
        for f in self.live(s) {
            out.push(Layout.data_path(&f).unwrap());
        }
        if let Some(l) = s.changelog_manifest_list.as_ref().filter(|_| changelog) {
            for m in &self.lists[l] {
                for e in &self.manifests[m] {
                    out.push(Layout.data_path(&e.file).unwrap());
                }
            }
        }
        if let Some(i) = &s.index_manifest {
            out.push(Layout.manifest_path(i));
            out.extend(self.index[i].iter().cloned());
        }
        out
    }

    /// Every remaining snapshot (a contiguous range) and tag reads whole.
    fn check_readable(&self, context: &str) -> std::result::Result<(), TestCaseError> {
        let ids = self.snapshot_ids();
        if let (Some(first), Some(last)) = (ids.first(), ids.last()) {
            prop_assert_eq!(
                &ids,
                &(*first..=*last).collect::<Vec<_>>(),
                "{}: ids not contiguous",
                context
            );
        }
        let entry_points = ids
            .iter()
            .map(|id| (format!("snapshot {id}"), *id, !self.restored.contains(id)))
            .chain(
                self.tags()
                    .into_iter()
                    .map(|(n, id)| (format!("tag {n}"), id, false)),
            );
        for (what, id, changelog) in entry_points {
            for path in self.needs(&self.snapshots[&id], changelog) {
                prop_assert!(
                    self.store.contains(&path),
                    "{}: {} lost {}",
                    context,
                    what,
                    path
                );
            }
        }
        Ok(())
    }

    /// Takes the steps, as the executor does on storage.
    fn apply(&mut self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::DeleteSnapshot(id) => {
                    self.store.remove(&snapshot_path(*id));
                }
                Step::DeleteTag(name) => {
                    self.store.remove(&tag_path(name));
                }
                Step::Restore(s) => {
                    self.store.insert(snapshot_path(s.id));
                    self.restored.insert(s.id);
                }
                Step::DeleteFile { path, .. } => {
                    self.store.remove(path);
                }
                Step::EarliestHint(id) => self.earliest_hint = Some(*id),
                Step::LatestHint(_) => {}
                other => panic!("the model does not take {other:?}"),
            }
        }
    }

    /// What orphan removal decides, over the model's entry points and its files.
    fn orphan_plan(&self) -> Plan {
        let mut used = Used::default();
        // Tags hold their data lists only (`referenced_snapshots`).
        let entry_points = self
            .snapshot_ids()
            .into_iter()
            .map(|id| (id, true))
            .chain(self.tags().into_iter().map(|(_, id)| (id, false)));
        for (id, changelog) in entry_points {
            let s = &self.snapshots[&id];
            let lists = Self::lists_of(s)
                .into_iter()
                .filter(|l| changelog || Some(*l) != s.changelog_manifest_list.as_ref());
            for l in lists {
                used.manifests.insert(l.clone());
                // A list that is gone names nothing (a tag's expired changelog).
                for m in self.lists[l].iter().filter(|_| self.has_manifest(l)) {
                    used.manifests.insert(m.clone());
                    used.files
                        .extend(self.manifests[m].iter().map(|e| e.file.name.clone()));
                }
            }
            if let Some(i) = &s.index_manifest {
                used.manifests.insert(i.clone());
                used.index_files.extend(self.index[i].iter().cloned());
            }
        }
        let listed: Vec<FileStatus> = self
            .store
            .iter()
            .map(|p| FileStatus {
                path: p.clone(),
                size: 1,
                last_modified_millis: 0,
            })
            .collect();
        orphans::plan(ROOT, &listed, &used, 1, "orphans")
    }

    /// The expiry that keeps the newest `keep` snapshots (`None`: nothing expires).
    fn expiry(&self, keep: i64) -> Option<Plan> {
        let ids = self.snapshot_ids();
        let (earliest, latest) = (*ids.first()?, *ids.last()?);
        let end = earliest.max(latest - keep + 1);
        let unfinished = self.earliest_hint.is_some_and(|h| h < earliest);
        if end <= earliest && !unfinished {
            return None;
        }
        let mut input = ExpiryInput {
            earliest,
            end,
            unfinished,
            ..Default::default()
        };
        for id in earliest..=end {
            input
                .snapshots
                .insert(id, self.files_of(&self.snapshots[&id]));
        }
        self.hold(&mut input.held, &self.snapshots[&end]);
        for (_, id) in self.tags() {
            self.hold(&mut input.held, &self.snapshots[&id]);
        }
        Some(expire_snapshots::plan(&input, &Layout, "expiry").unwrap())
    }

    /// A rollback to snapshot or tagged id `target`.
    fn rollback(&self, target: i64) -> Plan {
        let ids = self.snapshot_ids();
        let tags = self.tags();
        let mut held = Held::default();
        self.hold(&mut held, &self.snapshots[&target]);
        let mut later_tags = Vec::new();
        for (name, id) in &tags {
            if *id > target {
                later_tags.push(name.clone());
            } else {
                self.hold(&mut held, &self.snapshots[id]);
            }
        }
        let input = RollbackInput {
            target: self.snapshots[&target].clone(),
            restore: !ids.contains(&target),
            later: ids
                .iter()
                .rev()
                .filter(|id| **id > target)
                .map(|id| self.files_of(&self.snapshots[id]))
                .collect(),
            held,
            later_tags,
            first_listed: ids.first().copied(),
        };
        rollback::plan(&input, &Layout, "rollback").unwrap()
    }

    /// The deletion of tag `name`.
    fn tag_deletion(&self, name: &str) -> Plan {
        let tagged = &self.snapshots[&self.tags[name]];
        let others: Vec<i64> = self
            .tags()
            .into_iter()
            .filter(|(n, _)| n != name)
            .map(|(_, id)| id)
            .collect();
        let ids = self.snapshot_ids();
        let mut input = TagDeletion {
            name: name.to_string(),
            frees_nothing: ids.contains(&tagged.id) || others.contains(&tagged.id),
            ..Default::default()
        };
        if !input.frees_nothing {
            for id in others.iter().chain(ids.first()) {
                self.hold(&mut input.held, &self.snapshots[id]);
            }
            self.hold(&mut input.tagged, tagged);
        }
        tags::plan(&input, &Layout, "tag deletion").unwrap()
    }
}

/// Stops `plan` after each of its steps in turn; after each stop, the table reads, `rerun` (the
/// operation planned again on what is left) finishes the job, and removing orphans then leaves
/// exactly what an uninterrupted run followed by orphan removal leaves.
fn stopped_at_every_step(
    model: &Model,
    plan: &Plan,
    rerun: impl Fn(&Model) -> Option<Plan>,
) -> std::result::Result<(), TestCaseError> {
    stopped_at_every_step_leaking(model, plan, rerun, false)
}

/// [`stopped_at_every_step`]; with `may_leak`, a stopped run may leave data files behind that no
/// remaining snapshot or tag reads but that orphan removal keeps, because a retained manifest
/// still names them (a tag deletion stopped after its tag file: Paimon's orphan rule counts
/// every file a retained manifest names, ADD or DELETE, as used).
fn stopped_at_every_step_leaking(
    model: &Model,
    plan: &Plan,
    rerun: impl Fn(&Model) -> Option<Plan>,
    may_leak: bool,
) -> std::result::Result<(), TestCaseError> {
    let mut clean = model.clone();
    clean.apply(&plan.steps);
    clean.check_readable("uninterrupted")?;
    let clean_ids = clean.snapshot_ids();
    let orphans = clean.orphan_plan();
    clean.apply(&orphans.steps);
    clean.check_readable("uninterrupted, orphans removed")?;
    for stop in 0..=plan.steps.len() {
        let context = format!("stopped after {stop} of {} steps", plan.steps.len());
        let mut m = model.clone();
        m.apply(&plan.steps[..stop]);
        m.check_readable(&context)?;
        if let Some(again) = rerun(&m) {
            m.apply(&again.steps);
        }
        m.check_readable(&format!("{context}, run again"))?;
        prop_assert_eq!(&m.snapshot_ids(), &clean_ids, "{}", context);
        let orphans = m.orphan_plan();
        m.apply(&orphans.steps);
        if !may_leak {
            prop_assert_eq!(
                &m.store,
                &clean.store,
                "{}: leftovers that were not orphans",
                context
            );
            continue;
        }
        prop_assert!(
            m.store.is_superset(&clean.store),
            "{}: lost what a clean run keeps",
            context
        );
        let read: BTreeSet<String> = m
            .snapshot_ids()
            .into_iter()
            .map(|id| (id, !m.restored.contains(&id)))
            .chain(m.tags().into_iter().map(|(_, id)| (id, false)))
            .flat_map(|(id, changelog)| m.needs(&m.snapshots[&id], changelog))
            .collect();
        for leaked in m.store.difference(&clean.store) {
            prop_assert!(
                leaked.contains("/bucket-") && !read.contains(leaked),
                "{}: {} left behind is not an unread data file",
                context,
                leaked
            );
        }
    }
    Ok(())
}

proptest! {
    // Deterministic (STYLE 17): the same 96 histories on every run, nothing persisted.
    #![proptest_config(ProptestConfig {
        cases: 96,
        rng_seed: proptest::test_runner::RngSeed::Fixed(42),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn an_expiry_stopped_anywhere_leaves_every_snapshot_readable(
        commits in prop::collection::vec(commit(), 2..14),
        tagged in prop::collection::vec(0..14usize, 0..3),
        keep in 1..4i64,
    ) {
        let model = Model::build(&commits, &tagged);
        model.check_readable("as written")?;
        if let Some(plan) = model.expiry(keep) {
            // The plan is its own dry run.
            prop_assert_eq!(plan.report().snapshots.len() as i64,
                model.snapshot_ids().len() as i64 - keep);
            stopped_at_every_step(&model, &plan, |m| m.expiry(keep))?;
        }
    }

    #[test]
    fn a_rollback_stopped_anywhere_leaves_every_snapshot_readable(
        commits in prop::collection::vec(commit(), 2..14),
        tagged in prop::collection::vec(0..14usize, 0..3),
        expire_first in prop::option::of(1..4i64),
        to in 0..14usize,
    ) {
        let mut model = Model::build(&commits, &tagged);
        // Expired first, a tag may outlive its snapshot: rolling back to it restores it.
        if let Some(plan) = expire_first.and_then(|keep| model.expiry(keep)) {
            model.apply(&plan.steps);
        }
        let targets: Vec<i64> = model
            .snapshot_ids()
            .into_iter()
            .chain(model.tags().into_iter().map(|(_, id)| id))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let target = targets[to % targets.len()];
        let plan = model.rollback(target);
        prop_assert!(!plan.report().snapshots.contains(&target));
        stopped_at_every_step(&model, &plan, |m| Some(m.rollback(target)))?;
    }

    #[test]
    fn a_tag_deletion_stopped_anywhere_leaves_the_rest_readable(
        commits in prop::collection::vec(commit(), 2..12),
        tagged in prop::collection::vec(0..12usize, 1..3),
        keep in 1..3i64,
    ) {
        let mut model = Model::build(&commits, &tagged);
        if let Some(plan) = model.expiry(keep) {
            model.apply(&plan.steps);
        }
        let plan = model.tag_deletion("t0");
        prop_assert_eq!(&plan.steps[0], &Step::DeleteTag("t0".into()));
        let rerun = |m: &Model| m.tags().iter().any(|(n, _)| n == "t0").then(|| m.tag_deletion("t0"));
        stopped_at_every_step_leaking(&model, &plan, rerun, true)?;
    }
}

#[test]
fn an_expiry_deletes_each_snapshot_before_the_files_only_it_read() {
    // 1: a, b   2: compaction a,b -> c   3: d   (keep 1: snapshots 1 and 2 go)
    let commits = [
        Commit {
            adds: 2,
            deletes: vec![],
            bucket: 0,
            changelog: true,
            merge_manifests: false,
            new_index: false,
        },
        Commit {
            adds: 1,
            deletes: vec![0, 1],
            bucket: 0,
            changelog: false,
            merge_manifests: false,
            new_index: false,
        },
        Commit {
            adds: 1,
            deletes: vec![],
            bucket: 0,
            changelog: false,
            merge_manifests: false,
            new_index: false,
        },
    ];
    let model = Model::build(&commits, &[]);
    let plan = model.expiry(1).unwrap();
    let data = |n: &str| Step::delete(format!("t/bucket-0/{n}"));
    let manifest = |n: &str| Step::delete(format!("t/manifest/{n}"));
    assert_eq!(
        plan.steps,
        vec![
            Step::DeleteSnapshot(1),
            // Compaction 2 removed a and b: live only in snapshot 1.
            data("data-1-0.parquet"),
            data("data-1-1.parquet"),
            Step::DeleteSnapshot(2),
            Step::EarliestHint(3),
            // Snapshot 1's changelog file went with it.
            data("changelog-1.parquet"),
            manifest("base-1"),
            manifest("base-2"),
            manifest("cl-1"),
            manifest("cm-1"),
            manifest("delta-1"),
            manifest("delta-2"),
        ]
    );
}

#[test]
fn validation_without_the_table_checks_only_what_the_request_says() {
    use super::{CreateTag, ExpireSnapshots, Request, RollbackTarget};
    // retain_max 5 is fine on its own; only the table's retain_min can refuse it.
    let r = Request::ExpireSnapshots(ExpireSnapshots {
        retain_max: Some(5),
        ..Default::default()
    });
    assert!(r.validate().is_ok());
    let crossed = Request::ExpireSnapshots(ExpireSnapshots {
        retain_max: Some(2),
        retain_min: Some(3),
        ..Default::default()
    });
    assert!(crossed.validate().is_err());
    let unnamed = Request::CreateTag(CreateTag::default());
    assert_eq!(
        unnamed.validate().unwrap_err().to_string(),
        "create_tag needs a tag name"
    );
    let blank = Request::Rollback(RollbackTarget::Tag(" ".into()));
    assert_eq!(
        blank.validate().unwrap_err().to_string(),
        "rollback needs a tag name"
    );
}

#[test]
fn compaction_strategy() {
    use super::Compact;
    assert!(Compact::strategy("FULL").unwrap());
    assert!(!Compact::strategy("minor").unwrap());
    assert_eq!(
        Compact::strategy("sideways").unwrap_err().to_string(),
        "compaction mode 'sideways' is neither 'full' nor 'minor'"
    );
}
