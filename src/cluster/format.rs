//! Formatting a cluster node's data directory before its first start, as Kafka's
//! `kafka-storage format` does (KIP-853): `meta.properties` with the cluster id, the
//! node id and a directory id, and the metadata log's Raft state with the voters the
//! quorum starts with. A node started on an empty directory formats it itself (the
//! voters of `--quorum`, a cluster id the first controller draws); formatting first
//! fixes the cluster id and, with [`NodeFormat::NoInitialControllers`], makes a node
//! that joins an existing quorum wait to be added before it votes.

use std::path::Path;

use crate::broker::{CLUSTER_METADATA_DIR, is_cluster_dir};
use crate::error::{Error, IoContext, Result};
use crate::storage::codec;

use super::inbox::raft_id;
use super::{meta_properties, storage, voters};

/// How the metadata quorum of a formatted node starts (`kafka-storage format`'s
/// modes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeFormat {
    /// The node is the quorum's only voter (`--standalone`); more are added online.
    Standalone,
    /// The quorum starts with these voters (`--initial-controllers`, Kafka's syntax
    /// `ID@HOST:PORT:DIRECTORY_ID,...`), this node among them: its directory id is the
    /// one its entry names.
    InitialControllers(String),
    /// The node joins a quorum that already runs (`--no-initial-controllers`): it
    /// follows the metadata log and does not vote, campaign or count towards a
    /// majority until it is added as a voter (`tidelog quorum add-voter`) and the quorum
    /// recorded its directory id.
    NoInitialControllers,
}

/// What [`format_node`] wrote (or, for a directory formatted before and
/// `ignore_formatted`, found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormattedNode {
    /// `node.id`.
    pub node_id: i32,
    /// `cluster.id`.
    pub cluster_id: String,
    /// `directory.id`.
    pub directory_id: String,
    /// The voters the quorum starts with (empty for
    /// [`NodeFormat::NoInitialControllers`] and for a directory formatted before).
    pub voters: Vec<i32>,
    /// The directory was formatted before and left as it was (`ignore_formatted`).
    pub already_formatted: bool,
}

/// Formats `dir` for node `node_id` of cluster `cluster_id` (a base64 UUID, as
/// `kafka-storage random-uuid` prints). Refuses a directory formatted before (unless
/// `ignore_formatted`: then it is left as it is), one that holds anything else, a
/// malformed cluster id, a negative node id, and an `--initial-controllers` list that
/// is malformed or does not name this node.
pub fn format_node(
    dir: &Path,
    cluster_id: &str,
    node_id: i32,
    mode: &NodeFormat,
    ignore_formatted: bool,
) -> Result<FormattedNode> {
    if codec::uuid_from_base64(cluster_id).is_none() {
        return Err(Error::InvalidConfig {
            key: "cluster.id".into(),
            reason: format!(
                "{cluster_id:?} is not a cluster id: a UUID in 22 characters of URL-safe base64, as kafka-storage random-uuid prints (for example {})",
                codec::uuid_base64(&codec::random_uuid())
            ),
        });
    }
    if node_id < 0 {
        return Err(Error::InvalidConfig {
            key: "node.id".into(),
            reason: format!("node id {node_id} is negative"),
        });
    }
    let (voters, directory_id) = match mode {
        NodeFormat::Standalone => (vec![node_id], random_directory_id()),
        NodeFormat::NoInitialControllers => (Vec::new(), random_directory_id()),
        NodeFormat::InitialControllers(list) => {
            let controllers = parse_initial_controllers(list)?;
            let Some((_, mine)) = controllers.iter().find(|(id, _)| *id == node_id) else {
                return Err(Error::InvalidConfig {
                    key: "initial-controllers".into(),
                    reason: format!(
                        "node {node_id} is not among the initial controllers {:?}: format a node that joins with --no-initial-controllers",
                        controllers.iter().map(|(id, _)| *id).collect::<Vec<_>>()
                    ),
                });
            };
            let mine = mine.clone();
            (controllers.into_iter().map(|(id, _)| id).collect(), mine)
        }
    };
    if let Some(found) = formatted_before(dir)? {
        if ignore_formatted {
            return Ok(found);
        }
        return Err(Error::InvalidConfig {
            key: "data".into(),
            reason: format!(
                "{} is formatted already, as node {} of cluster {} (directory id {}); a data directory is formatted once: use another (--ignore-formatted leaves a formatted one as it is)",
                dir.display(),
                found.node_id,
                found.cluster_id,
                found.directory_id
            ),
        });
    }
    let meta_dir = dir.join(CLUSTER_METADATA_DIR);
    std::fs::create_dir_all(&meta_dir).ctx("create directory", &meta_dir)?;
    if mode == &NodeFormat::NoInitialControllers {
        storage::mark_joining(&meta_dir)?;
    }
    let raft_voters: Vec<u64> = voters.iter().map(|v| raft_id(*v)).collect();
    drop(storage::RaftStorage::open(
        &meta_dir,
        raft_id(node_id),
        &raft_voters,
    )?);
    // Last: a directory with `meta.properties` is formatted.
    meta_properties::write(
        dir,
        &meta_properties::MetaProperties {
            node_id,
            cluster_id: cluster_id.to_string(),
            directory_id: Some(directory_id.clone()),
        },
    )?;
    Ok(FormattedNode {
        node_id,
        cluster_id: cluster_id.to_string(),
        directory_id,
        voters,
        already_formatted: false,
    })
}

fn random_directory_id() -> String {
    codec::uuid_base64(&codec::random_uuid())
}

/// What a directory formatted before says of itself; None for an empty or missing
/// directory; an error for one that holds anything else (a single node's data, a
/// metadata log without `meta.properties`, other files).
fn formatted_before(dir: &Path) -> Result<Option<FormattedNode>> {
    if let Some(p) = meta_properties::read(dir)? {
        let directory_id = p.directory_id.unwrap_or_default();
        return Ok(Some(FormattedNode {
            node_id: p.node_id,
            cluster_id: p.cluster_id,
            directory_id,
            voters: Vec::new(),
            already_formatted: true,
        }));
    }
    let refuse = |what: String| Error::InvalidConfig {
        key: "data".into(),
        reason: format!("{} {what}; format an empty or new directory", dir.display()),
    };
    if is_cluster_dir(dir) {
        return Err(refuse(
            "holds a cluster node's metadata log (it started before without being formatted)"
                .into(),
        ));
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read directory", dir, e)),
    };
    for entry in entries {
        let name = entry.ctx("read directory", dir)?.file_name();
        if name != "lost+found" {
            return Err(refuse(format!(
                "is not empty (it holds {name:?}): it may hold a single node's data"
            )));
        }
    }
    Ok(None)
}

/// Parses `--initial-controllers`: `ID@HOST:PORT:DIRECTORY_ID,...` (Kafka's syntax),
/// into each node id with its directory id.
fn parse_initial_controllers(list: &str) -> Result<Vec<(i32, String)>> {
    let bad = |reason: String| Error::InvalidConfig {
        key: "initial-controllers".into(),
        reason,
    };
    let mut quorum = Vec::new();
    let mut directories = Vec::new();
    let mut entries = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (voter, directory_id) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("{entry:?} is not ID@HOST:PORT:DIRECTORY_ID")))?;
        if codec::uuid_from_base64(directory_id).is_none() {
            return Err(bad(format!(
                "{directory_id:?} in {entry:?} is not a directory id (a UUID in 22 characters of URL-safe base64)"
            )));
        }
        if let Some(i) = directories.iter().position(|d| *d == directory_id) {
            return Err(bad(format!(
                "directory id {directory_id} is listed twice ({:?} and {entry:?}): each controller has a directory of its own",
                entries[i]
            )));
        }
        directories.push(directory_id);
        entries.push(entry);
        quorum.push(voter);
    }
    let parsed = voters::parse_quorum(&quorum.join(",")).map_err(|e| match e {
        Error::InvalidConfig { reason, .. } => bad(reason),
        other => other,
    })?;
    Ok(parsed
        .into_iter()
        .zip(directories)
        .map(|(v, d)| (v.id, d.to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "MkU3OEVBNTcwNTJENDM2Qg";

    fn ids() -> (String, String) {
        (random_directory_id(), random_directory_id())
    }

    #[test]
    fn each_mode_writes_meta_properties_and_the_voters() {
        let dir = tempfile::tempdir().unwrap();
        let (d1, d2) = ids();
        let list = format!("1@127.0.0.1:9093:{d1},2@127.0.0.1:9193:{d2}");
        for (sub, node, mode, voters, joining) in [
            ("a", 1, NodeFormat::Standalone, vec![1], false),
            (
                "b",
                2,
                NodeFormat::InitialControllers(list),
                vec![1, 2],
                false,
            ),
            ("c", 4, NodeFormat::NoInitialControllers, vec![], true),
        ] {
            let d = dir.path().join(sub);
            let f = format_node(&d, CLUSTER, node, &mode, false).unwrap();
            assert_eq!(
                (f.node_id, &f.voters, f.already_formatted),
                (node, &voters, false)
            );
            let p = meta_properties::read(&d).unwrap().unwrap();
            assert_eq!(p.cluster_id, CLUSTER);
            assert_eq!(p.node_id, node);
            assert_eq!(p.directory_id.as_deref(), Some(f.directory_id.as_str()));
            if node == 2 {
                assert_eq!(f.directory_id, d2, "its entry's directory id");
            }
            let meta_dir = d.join(CLUSTER_METADATA_DIR);
            assert!(is_cluster_dir(&d));
            assert_eq!(storage::is_joining(&meta_dir), joining);
            let store = storage::RaftStorage::open(
                &meta_dir,
                raft_id(node),
                &voters.iter().map(|v| raft_id(*v)).collect::<Vec<_>>(),
            )
            .unwrap();
            let cs = raft::Storage::initial_state(&store).unwrap().conf_state;
            let want: Vec<u64> = voters.iter().map(|v| raft_id(*v)).collect();
            assert_eq!(cs.voters, want);
        }
        // A node formatted with voters is started with them.
        let meta_dir = dir.path().join("a").join(CLUSTER_METADATA_DIR);
        let e = storage::RaftStorage::open(&meta_dir, raft_id(1), &[raft_id(1), raft_id(2)])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("voters [1] but --quorum lists [1, 2]"),
            "{e}"
        );
        // A joiner takes the voters it is first started with, and keeps them.
        let meta_dir = dir.path().join("c").join(CLUSTER_METADATA_DIR);
        let quorum = [raft_id(1), raft_id(2), raft_id(3)];
        drop(storage::RaftStorage::open(&meta_dir, raft_id(4), &quorum).unwrap());
        let e = storage::RaftStorage::open(&meta_dir, raft_id(4), &[raft_id(1)]).unwrap_err();
        assert!(e.to_string().contains("--quorum lists"), "{e}");
    }

    #[test]
    fn a_formatted_directory_is_refused_unless_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let first = format_node(dir.path(), CLUSTER, 1, &NodeFormat::Standalone, false).unwrap();
        let e = format_node(dir.path(), CLUSTER, 1, &NodeFormat::Standalone, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("formatted already") && e.contains(&first.directory_id),
            "{e}"
        );
        let again = format_node(
            dir.path(),
            CLUSTER,
            2,
            &NodeFormat::NoInitialControllers,
            true,
        )
        .unwrap();
        assert!(again.already_formatted);
        assert_eq!((again.node_id, again.directory_id), (1, first.directory_id));
        assert!(!storage::is_joining(&dir.path().join(CLUSTER_METADATA_DIR)));
    }

    #[test]
    fn bad_input_is_refused_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("n");
        let refused = |cluster: &str, node: i32, mode: NodeFormat| {
            format_node(&d, cluster, node, &mode, false)
                .unwrap_err()
                .to_string()
        };
        let e = refused("not-an-id", 1, NodeFormat::Standalone);
        assert!(e.contains("\"not-an-id\" is not a cluster id"), "{e}");
        let e = refused(CLUSTER, -1, NodeFormat::Standalone);
        assert!(e.contains("negative"), "{e}");
        let (d1, d2) = ids();
        let list = |s: String| NodeFormat::InitialControllers(s);
        let e = refused(CLUSTER, 3, list(format!("1@h:1:{d1},2@h:2:{d2}")));
        assert!(
            e.contains("node 3 is not among the initial controllers [1, 2]"),
            "{e}"
        );
        let e = refused(CLUSTER, 1, list("1@h:1".into()));
        assert!(
            e.contains("\"1\" in \"1@h:1\" is not a directory id"),
            "{e}"
        );
        let e = refused(CLUSTER, 1, list(format!("1@h:1:{d1},2@h:2:{d1}")));
        assert!(
            e.contains(&format!(
                "directory id {d1} is listed twice (\"1@h:1:{d1}\" and \"2@h:2:{d1}\")"
            )),
            "{e}"
        );
        let e = refused(CLUSTER, 1, list(format!("1@h:1:{d1},2@h:1:{d2}")));
        assert!(e.contains("\"2@h:1\" has the address of \"1@h:1\""), "{e}");
        let e = refused(CLUSTER, 1, list(format!("1@h:1:{d1},1@h:2:{d2}")));
        assert!(e.contains("node id 1 is listed twice"), "{e}");
        let e = refused(CLUSTER, 1, list(format!("1@h:x:{d1}")));
        assert!(e.contains("is not HOST:PORT"), "{e}");
        // Nothing was written by a refusal.
        assert!(!d.exists());
        // A directory holding anything else.
        std::fs::create_dir_all(d.join("orders-0")).unwrap();
        let e = refused(CLUSTER, 1, NodeFormat::Standalone);
        assert!(e.contains("is not empty") && e.contains("orders-0"), "{e}");
    }
}
