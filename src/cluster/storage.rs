//! The Raft log on disk: `<data>/__cluster_metadata-0/`, implementing raft-rs's
//! [`Storage`].
//!
//! Files (every byte in docs/format.md):
//! - `raft-state`: node id, voters, and the hard state (term, vote, commit), as a
//!   crash-safe checkpoint (temp file, fsync, rename, directory fsync, CRC32).
//! - `entries.log`: the entries after the snapshot, appended as CRC'd records and
//!   fsynced before raft-rs is told they are persisted. Entries that conflict with a new
//!   leader's are cut off (truncate, then append). A torn record at the end (a crash in
//!   the middle of an append, never acknowledged) is cut off on open; a bad record with
//!   good ones after it is corruption and refuses the open.
//! - `snapshot`: the latest snapshot (index, term, voters, the metadata image) as a
//!   checkpoint. Taking one rewrites `entries.log` without the entries it covers (temp
//!   file, fsync, rename), so a restart replays a bounded tail.
//!
//! - `joining`: present while a directory formatted to join waits for the quorum to
//!   record its directory id ([`JOINING_FILE`]).
//!
//! Every entry after the snapshot is also held in memory: the metadata log is small, and
//! raft-rs then never waits for a disk read.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use raft::prelude::{ConfState, Entry, EntryType, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::storage::codec::{Reader, Writer};
use crate::storage::{read_checkpoint, write_checkpoint};

/// The raft state file.
pub(crate) const STATE_FILE: &str = "raft-state";
/// The entry file.
pub(crate) const ENTRIES_FILE: &str = "entries.log";
/// The snapshot file.
pub(crate) const SNAPSHOT_FILE: &str = "snapshot";
/// The clean-shutdown marker.
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
/// The file whose presence says this data directory was formatted to join a cluster
/// (`tidelog format --no-initial-controllers`) and the quorum has not yet recorded its
/// directory id: until then the node neither votes nor campaigns
/// ([`super::amnesia::may_vote`]). Empty; removed once the record is applied.
pub(crate) const JOINING_FILE: &str = "joining";

/// Size of an entry record's header: length (u32) and CRC32 (u32).
const RECORD_HEADER: usize = 8;
/// Largest entry record accepted on read.
const MAX_RECORD: usize = 64 << 20;
/// Version of the raft-state payload (2 adds the learners; 1 is still read).
const STATE_VERSION: u8 = 2;
/// Version of the snapshot payload (2 adds the learners; 1 is still read).
const SNAPSHOT_VERSION: u8 = 2;

/// One entry's place in `entries.log`.
#[derive(Debug, Clone, Copy)]
struct Located {
    /// Byte position of its record.
    pos: u64,
}

/// raft-rs's storage, persisted in one directory.
pub(crate) struct RaftStorage {
    dir: PathBuf,
    node_id: u64,
    hard_state: HardState,
    conf_state: ConfState,
    /// The quorum state changed online: configuration changes were applied (the
    /// stored voters then rule over `--quorum`), and the quorum addresses of the nodes
    /// they added, by raft id.
    reconfigured: Reconfigured,
    /// The latest snapshot (data = the encoded metadata image at its index).
    snapshot: Snapshot,
    /// Entries after the snapshot, contiguous.
    entries: Vec<Entry>,
    /// Where each of `entries` starts in the file.
    positions: Vec<Located>,
    /// `entries.log`, opened for appends.
    file: File,
    /// Its length.
    file_len: u64,
}

impl std::fmt::Debug for RaftStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftStorage")
            .field("dir", &self.dir)
            .field("first_index", &self.first())
            .field("last_index", &self.last())
            .finish_non_exhaustive()
    }
}

fn encode_entry(e: &Entry) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(e.index);
    w.u64(e.term);
    w.u8(e.get_entry_type() as u8);
    w.bytes(&e.data);
    w.bytes(&e.context);
    let body = w.into_bytes();
    let mut out = Vec::with_capacity(body.len() + RECORD_HEADER);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crate::storage::crc32(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode_entry(body: &[u8], location: &str) -> Result<Entry> {
    let mut r = Reader::new(body, location);
    let mut e = Entry {
        index: r.u64()?,
        term: r.u64()?,
        ..Default::default()
    };
    e.set_entry_type(match r.u8()? {
        0 => EntryType::EntryNormal,
        1 => EntryType::EntryConfChange,
        2 => EntryType::EntryConfChangeV2,
        t => return Err(r.error(format!("unknown entry type {t}"))),
    });
    e.data = r.bytes()?.to_vec().into();
    e.context = r.bytes()?.to_vec().into();
    r.finish()?;
    Ok(e)
}

/// What online configuration changes left in `raft-state`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reconfigured {
    /// True once a configuration change was applied.
    pub changed: bool,
    /// Quorum addresses of the nodes the changes added, by raft id.
    pub addresses: std::collections::BTreeMap<u64, String>,
}

fn encode_state(node_id: u64, hs: &HardState, cs: &ConfState, rc: &Reconfigured) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(STATE_VERSION);
    w.u64(node_id);
    w.u64(hs.term);
    w.u64(hs.vote);
    w.u64(hs.commit);
    write_ids(&mut w, &cs.voters);
    write_ids(&mut w, &cs.learners);
    w.bool(rc.changed);
    w.u32(rc.addresses.len() as u32);
    for (id, addr) in &rc.addresses {
        w.u64(*id);
        w.str(addr);
    }
    w.into_bytes()
}

/// A list of raft ids: u32 count, u64 each.
fn write_ids(w: &mut Writer, ids: &[u64]) {
    w.u32(ids.len() as u32);
    for v in ids {
        w.u64(*v);
    }
}

/// A list written by [`write_ids`].
fn read_ids(r: &mut Reader<'_>) -> Result<Vec<u64>> {
    let n = r.count(8)?;
    (0..n).map(|_| r.u64()).collect()
}

fn decode_state(bytes: &[u8], location: &str) -> Result<(u64, HardState, ConfState, Reconfigured)> {
    let mut r = Reader::new(bytes, location);
    let version = r.u8()?;
    if version != 1 && version != STATE_VERSION {
        return Err(r.error(format!(
            "raft state version {version}; this node reads 1 to {STATE_VERSION}"
        )));
    }
    let node_id = r.u64()?;
    let hs = HardState {
        term: r.u64()?,
        vote: r.u64()?,
        commit: r.u64()?,
        ..Default::default()
    };
    let mut cs = ConfState {
        voters: read_ids(&mut r)?,
        ..Default::default()
    };
    let mut rc = Reconfigured::default();
    if version >= 2 {
        cs.learners = read_ids(&mut r)?;
        rc.changed = r.bool()?;
        let n = r.count(12)?;
        for _ in 0..n {
            let id = r.u64()?;
            rc.addresses.insert(id, r.str()?);
        }
    }
    r.finish()?;
    Ok((node_id, hs, cs, rc))
}

fn encode_snapshot(s: &Snapshot) -> Vec<u8> {
    let m = s.get_metadata();
    let mut w = Writer::new();
    w.u8(SNAPSHOT_VERSION);
    w.u64(m.index);
    w.u64(m.term);
    write_ids(&mut w, &m.get_conf_state().voters);
    write_ids(&mut w, &m.get_conf_state().learners);
    w.bytes(&s.data);
    w.into_bytes()
}

fn decode_snapshot(bytes: &[u8], location: &str) -> Result<Snapshot> {
    let mut r = Reader::new(bytes, location);
    let version = r.u8()?;
    if version != 1 && version != SNAPSHOT_VERSION {
        return Err(r.error(format!(
            "snapshot version {version}; this node reads 1 to {SNAPSHOT_VERSION}"
        )));
    }
    let mut s = Snapshot::default();
    let m = s.mut_metadata();
    m.index = r.u64()?;
    m.term = r.u64()?;
    m.mut_conf_state().voters = read_ids(&mut r)?;
    if version >= 2 {
        m.mut_conf_state().learners = read_ids(&mut r)?;
    }
    s.data = r.bytes()?.to_vec().into();
    r.finish()?;
    Ok(s)
}

/// Reads every record of `entries.log`: the entries, where each starts, and the length
/// of the valid prefix (a torn last record is left out).
fn read_entries(path: &Path) -> Result<(Vec<Entry>, Vec<Located>, u64)> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes).ctx("read", path)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("open", path, e)),
    }
    let location = path.display().to_string();
    let mut entries: Vec<Entry> = Vec::new();
    let mut positions = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let torn = |why: &str| {
            tracing::warn!(file = %location, position = pos, "cutting off a torn last entry ({why}): it was never acknowledged as persisted");
        };
        if rest.len() < RECORD_HEADER {
            torn("short header");
            break;
        }
        let len = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(rest[4..8].try_into().expect("4 bytes"));
        if len > MAX_RECORD {
            return Err(Error::corrupt(
                &location,
                pos as u64,
                format!("entry record of {len} bytes is over the {MAX_RECORD}-byte limit"),
            ));
        }
        if rest.len() < RECORD_HEADER + len {
            torn("short body");
            break;
        }
        let body = &rest[RECORD_HEADER..RECORD_HEADER + len];
        let end = pos + RECORD_HEADER + len;
        if crate::storage::crc32(body) != crc {
            if end == bytes.len() {
                torn("CRC mismatch in the last record");
                break;
            }
            return Err(Error::corrupt(
                &location,
                pos as u64,
                "CRC32 mismatch in an entry record followed by more records",
            ));
        }
        let e = decode_entry(body, &location)?;
        if let Some(prev) = entries.last()
            && e.index != prev.index + 1
        {
            return Err(Error::corrupt(
                &location,
                pos as u64,
                format!(
                    "entry {} follows entry {}: the log has a gap",
                    e.index, prev.index
                ),
            ));
        }
        entries.push(e);
        positions.push(Located { pos: pos as u64 });
        pos = end;
    }
    Ok((entries, positions, pos as u64))
}

/// Whether a stored Raft state is one formatted without voters and never used: no
/// voter, no learner, no configuration change, no term, vote or commit.
fn is_unbootstrapped(hs: &HardState, cs: &ConfState, rc: &Reconfigured) -> bool {
    cs.voters.is_empty()
        && cs.learners.is_empty()
        && !rc.changed
        && rc.addresses.is_empty()
        && *hs == HardState::default()
}

impl RaftStorage {
    /// Opens (or creates, with `voters`) the Raft storage in `dir` for raft node
    /// `node_id`. Errors name both ids if the directory belongs to another node, and the
    /// stored voters if the quorum changed.
    pub(crate) fn open(dir: &Path, node_id: u64, voters: &[u64]) -> Result<RaftStorage> {
        std::fs::create_dir_all(dir).ctx("create directory", dir)?;
        let state_path = dir.join(STATE_FILE);
        let mut wanted = voters.to_vec();
        wanted.sort_unstable();
        let (hard_state, conf_state, reconfigured) = match read_checkpoint(&state_path)? {
            Some(bytes) => {
                let (stored_node, hs, mut cs, rc) =
                    decode_state(&bytes, &state_path.display().to_string())?;
                if stored_node != node_id {
                    return Err(Error::InvalidConfig {
                        key: "node.id".into(),
                        reason: format!(
                            "{} belongs to node {} but this is node {}",
                            dir.display(),
                            stored_node.saturating_sub(1),
                            node_id.saturating_sub(1)
                        ),
                    });
                }
                if stored_node == node_id && is_unbootstrapped(&hs, &cs, &rc) {
                    // Formatted without voters (`tidelog format
                    // --no-initial-controllers`): the voters are the quorum's, which
                    // this node is told at its first start.
                    cs.voters = wanted.clone();
                    write_checkpoint(&state_path, &encode_state(node_id, &hs, &cs, &rc))?;
                }
                let mut stored = cs.voters.clone();
                stored.sort_unstable();
                if stored != wanted && rc.changed {
                    tracing::info!(
                        dir = %dir.display(),
                        voters = ?stored.iter().map(|x| x.saturating_sub(1)).collect::<Vec<_>>(),
                        "the voters changed online since this cluster started: the stored voters rule over --quorum"
                    );
                } else if stored != wanted {
                    let ids = |v: &[u64]| v.iter().map(|x| x.saturating_sub(1)).collect::<Vec<_>>();
                    return Err(Error::InvalidConfig {
                        key: "controller.quorum.voters".into(),
                        reason: format!(
                            "the metadata log in {} was written by the voters {:?} but --quorum lists {:?}; change the voters online (tidelog quorum add-voter|remove-voter), not through --quorum",
                            dir.display(),
                            ids(&stored),
                            ids(&wanted)
                        ),
                    });
                }
                (hs, cs, rc)
            }
            None => {
                let cs = ConfState {
                    voters: wanted.clone(),
                    ..Default::default()
                };
                let hs = HardState::default();
                let rc = Reconfigured::default();
                write_checkpoint(&state_path, &encode_state(node_id, &hs, &cs, &rc))?;
                (hs, cs, rc)
            }
        };
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        let snapshot = match read_checkpoint(&snapshot_path)? {
            Some(bytes) => decode_snapshot(&bytes, &snapshot_path.display().to_string())?,
            None => Snapshot::default(),
        };
        let entries_path = dir.join(ENTRIES_FILE);
        let (mut entries, mut positions, valid_len) = read_entries(&entries_path)?;
        // Entries the snapshot covers may remain after a crash during compaction.
        let snap_index = snapshot.get_metadata().index;
        let skip = entries.iter().take_while(|e| e.index <= snap_index).count();
        entries.drain(..skip);
        positions.drain(..skip);
        if let Some(first) = entries.first()
            && first.index != snap_index + 1
        {
            return Err(Error::corrupt(
                entries_path.display(),
                positions[0].pos,
                format!(
                    "the first entry is {} but the snapshot ends at {snap_index}",
                    first.index
                ),
            ));
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&entries_path)
            .ctx("open", &entries_path)?;
        let actual = file.metadata().ctx("stat", &entries_path)?.len();
        if actual != valid_len {
            file.set_len(valid_len)
                .ctx("truncate a torn entry off", &entries_path)?;
            file.sync_all().ctx("fsync", &entries_path)?;
        }
        let mut storage = RaftStorage {
            dir: dir.to_path_buf(),
            node_id,
            hard_state,
            conf_state,
            reconfigured,
            snapshot,
            entries,
            positions,
            file,
            file_len: valid_len,
        };
        // A commit index below the snapshot is stale: the snapshot is committed.
        storage.hard_state.commit = storage
            .hard_state
            .commit
            .max(snap_index)
            .min(storage.last());
        Ok(storage)
    }

    fn first(&self) -> u64 {
        self.snapshot.get_metadata().index + 1
    }

    fn last(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot.get_metadata().index, |e| e.index)
    }

    /// The latest snapshot.
    pub(crate) fn snapshot_ref(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Number of entries after the snapshot.
    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len()
    }

    fn persist_state(&self) -> Result<()> {
        write_checkpoint(
            &self.dir.join(STATE_FILE),
            &encode_state(
                self.node_id,
                &self.hard_state,
                &self.conf_state,
                &self.reconfigured,
            ),
        )
    }

    /// Persists a new hard state.
    pub(crate) fn set_hard_state(&mut self, hs: &HardState) -> Result<()> {
        self.hard_state = hs.clone();
        self.persist_state()
    }

    /// Persists the configuration raft-rs reached by applying a configuration change,
    /// with the quorum address of the node it added, if any.
    pub(crate) fn set_conf_state(
        &mut self,
        cs: &ConfState,
        added: Option<(u64, String)>,
    ) -> Result<()> {
        self.conf_state = cs.clone();
        self.reconfigured.changed = true;
        if let Some((id, addr)) = added {
            self.reconfigured.addresses.insert(id, addr);
        }
        self.persist_state()
    }

    /// What online configuration changes left: the added nodes' addresses.
    pub(crate) fn reconfigured(&self) -> &Reconfigured {
        &self.reconfigured
    }

    /// Notes a new commit index (persisted with the next hard state; a commit index that
    /// lags after a crash is learnt again from the leader).
    pub(crate) fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = commit;
    }

    /// Appends `ents` (replacing any conflicting suffix) and fsyncs.
    pub(crate) fn append(&mut self, ents: &[Entry]) -> Result<()> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        let path = self.dir.join(ENTRIES_FILE);
        if first.index < self.first() {
            return Err(Error::corrupt(
                path.display(),
                0,
                format!(
                    "raft appended entry {} below the snapshot ({})",
                    first.index,
                    self.first() - 1
                ),
            ));
        }
        if first.index > self.last() + 1 {
            return Err(Error::corrupt(
                path.display(),
                self.file_len,
                format!(
                    "raft appended entry {} after {}: the log would have a gap",
                    first.index,
                    self.last()
                ),
            ));
        }
        let keep = (first.index - self.first()) as usize;
        if keep < self.entries.len() {
            let cut = self.positions[keep].pos;
            self.file
                .set_len(cut)
                .ctx("truncate conflicting entries off", &path)?;
            self.file_len = cut;
            self.entries.truncate(keep);
            self.positions.truncate(keep);
        }
        let mut buf = Vec::new();
        for e in ents {
            self.positions.push(Located {
                pos: self.file_len + buf.len() as u64,
            });
            buf.extend_from_slice(&encode_entry(e));
        }
        self.file
            .write_all_at(&buf, self.file_len)
            .ctx("append entries to", &path)?;
        self.file.sync_data().ctx("fsync", &path)?;
        self.file_len += buf.len() as u64;
        self.entries.extend_from_slice(ents);
        Ok(())
    }

    /// Stores a snapshot received from the leader: it replaces the log.
    pub(crate) fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<()> {
        let m = snapshot.get_metadata();
        self.write_snapshot(snapshot)?;
        self.hard_state.term = self.hard_state.term.max(m.term);
        self.hard_state.commit = m.index;
        self.conf_state = m.get_conf_state().clone();
        self.rewrite_entries(Vec::new())?;
        self.persist_state()
    }

    fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<()> {
        write_checkpoint(&self.dir.join(SNAPSHOT_FILE), &encode_snapshot(snapshot))?;
        self.snapshot = snapshot.clone();
        Ok(())
    }

    /// Takes a snapshot of `image` (the encoded metadata image) at `index`, which must be
    /// applied, and drops the entries up to it.
    pub(crate) fn compact(&mut self, index: u64, image: Vec<u8>) -> Result<()> {
        if index < self.first() || index > self.last() {
            return Ok(());
        }
        let term = self.entries[(index - self.first()) as usize].term;
        let mut snapshot = Snapshot {
            data: image.into(),
            ..Default::default()
        };
        let m = snapshot.mut_metadata();
        m.index = index;
        m.term = term;
        m.set_conf_state(self.conf_state.clone());
        let keep = self
            .entries
            .iter()
            .filter(|e| e.index > index)
            .cloned()
            .collect();
        self.write_snapshot(&snapshot)?;
        self.rewrite_entries(keep)
    }

    /// Replaces `entries.log` with `keep` (temp file, fsync, rename, directory fsync).
    fn rewrite_entries(&mut self, keep: Vec<Entry>) -> Result<()> {
        let path = self.dir.join(ENTRIES_FILE);
        let tmp = self.dir.join(format!("{ENTRIES_FILE}.tmp"));
        let mut buf = Vec::new();
        let mut positions = Vec::with_capacity(keep.len());
        for e in &keep {
            positions.push(Located {
                pos: buf.len() as u64,
            });
            buf.extend_from_slice(&encode_entry(e));
        }
        {
            let mut f = File::create(&tmp).ctx("create", &tmp)?;
            f.write_all(&buf).ctx("write", &tmp)?;
            f.sync_all().ctx("fsync", &tmp)?;
        }
        std::fs::rename(&tmp, &path).ctx("rename into place", &path)?;
        crate::storage::sync_dir(&self.dir)?;
        self.file = OpenOptions::new()
            .write(true)
            .open(&path)
            .ctx("open", &path)?;
        self.file_len = buf.len() as u64;
        self.entries = keep;
        self.positions = positions;
        Ok(())
    }
}

fn store_err(e: StorageError) -> raft::Error {
    raft::Error::Store(e)
}

impl raft::Storage for RaftStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(store_err(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(store_err(StorageError::Unavailable));
        }
        let lo = (low - self.first()) as usize;
        let hi = (high - self.first()) as usize;
        let max = max_size.into().unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut size = 0u64;
        for e in &self.entries[lo..hi] {
            size += (e.data.len() + e.context.len() + 24) as u64;
            if !out.is_empty() && size > max {
                break;
            }
            out.push(e.clone());
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let snap = self.snapshot.get_metadata();
        if idx == snap.index {
            return Ok(snap.term);
        }
        if idx < self.first() {
            return Err(store_err(StorageError::Compacted));
        }
        if idx > self.last() {
            return Err(store_err(StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot.get_metadata().index < request_index
            || self.snapshot.get_metadata().index == 0
        {
            return Err(store_err(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(self.snapshot.clone())
    }
}

/// A node's metadata log as `dir` stores it, read without writing, locking or repairing
/// anything (for tools looking at a stopped node's disk): the raft id it belongs to, its
/// snapshot, and every entry after the snapshot (a torn last entry is left out, as an
/// open would cut it off). The stored commit index is no bound: it is persisted only
/// with the next hard state, so it lags (a restarted node learns it again).
pub(crate) fn read_stored(dir: &Path) -> Result<(u64, Snapshot, Vec<Entry>)> {
    let state_path = dir.join(STATE_FILE);
    let bytes = read_checkpoint(&state_path)?.ok_or_else(|| {
        Error::io(
            "read",
            &state_path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let (node_id, _, _, _) = decode_state(&bytes, &state_path.display().to_string())?;
    let snapshot_path = dir.join(SNAPSHOT_FILE);
    let snapshot = match read_checkpoint(&snapshot_path)? {
        Some(bytes) => decode_snapshot(&bytes, &snapshot_path.display().to_string())?,
        None => Snapshot::default(),
    };
    let (mut entries, _, _) = read_entries(&dir.join(ENTRIES_FILE))?;
    let snap_index = snapshot.get_metadata().index;
    entries.retain(|e| e.index > snap_index);
    Ok((node_id, snapshot, entries))
}

/// Reads the clean-shutdown marker: the broker epoch of the last controlled shutdown.
pub(crate) fn read_clean_shutdown(dir: &Path) -> Result<Option<i64>> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    match read_checkpoint(&path)? {
        None => Ok(None),
        Some(bytes) => {
            let location = path.display().to_string();
            let mut r = Reader::new(&bytes, &location);
            let epoch = r.i64()?;
            r.finish()?;
            Ok(Some(epoch))
        }
    }
}

/// Writes the clean-shutdown marker.
pub(crate) fn write_clean_shutdown(dir: &Path, epoch: i64) -> Result<()> {
    write_checkpoint(&dir.join(CLEAN_SHUTDOWN_FILE), &epoch.to_be_bytes())
}

/// Removes the clean-shutdown marker (at start: a crash from now on is unclean).
pub(crate) fn remove_clean_shutdown(dir: &Path) -> Result<()> {
    remove_synced(dir, CLEAN_SHUTDOWN_FILE)
}

/// Removes `dir/name` if it is there, and fsyncs `dir`.
fn remove_synced(dir: &Path, name: &str) -> Result<()> {
    let path = dir.join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => crate::storage::sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}

/// Whether `dir` (the metadata log's directory) holds [`JOINING_FILE`].
pub(crate) fn is_joining(dir: &Path) -> bool {
    dir.join(JOINING_FILE).exists()
}

/// Writes [`JOINING_FILE`] into `dir` (and fsyncs the directory).
pub(crate) fn mark_joining(dir: &Path) -> Result<()> {
    let path = dir.join(JOINING_FILE);
    std::fs::File::create(&path)
        .and_then(|f| f.sync_all())
        .ctx("create", &path)?;
    crate::storage::sync_dir(dir)
}

/// Removes [`JOINING_FILE`] from `dir`: the quorum recorded this directory's id.
pub(crate) fn clear_joining(dir: &Path) -> Result<()> {
    remove_synced(dir, JOINING_FILE)
}

/// The index of the snapshot stored in `dir` (0 if none), for tests.
#[cfg(test)]
pub(crate) fn stored_snapshot_index(dir: &Path) -> u64 {
    let path = dir.join(SNAPSHOT_FILE);
    read_checkpoint(&path)
        .ok()
        .flatten()
        .and_then(|b| decode_snapshot(&b, "snapshot").ok())
        .map_or(0, |s| s.get_metadata().index)
}

#[cfg(test)]
mod tests;
