//! `meta.properties` in a cluster node's data directory, in Kafka's format (a Java
//! properties file with `version=1`, `node.id=`, `cluster.id=` and `directory.id=`).
//! Written once the node learns the cluster id; checked at every start, so a node
//! refuses a data directory of another node or cluster. The directory id (Kafka's
//! `directory.id`, a random base64 UUID) names this incarnation of the directory: the
//! quorum records it, so a voter that comes back on an empty directory (a lost disk) is
//! told apart from a new one.

use std::path::Path;

use crate::error::IoContext;
use crate::error::{Error, Result};

/// The file name.
pub(crate) const FILE: &str = "meta.properties";

/// What the file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetaProperties {
    /// `node.id`.
    pub node_id: i32,
    /// `cluster.id`.
    pub cluster_id: String,
    /// `directory.id`; None in a file written before directory ids (one is then drawn
    /// and written at start).
    pub directory_id: Option<String>,
}

/// Reads `<dir>/meta.properties`; None if there is none.
pub(crate) fn read(dir: &Path) -> Result<Option<MetaProperties>> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let mut version = None;
    let mut node_id = None;
    let mut cluster_id = None;
    let mut directory_id = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let bad = |why: String| Error::corrupt(path.display(), n as u64, why);
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| bad(format!("line {} is not key=value: {line:?}", n + 1)))?;
        match k.trim() {
            "version" => version = Some(v.trim().to_string()),
            "node.id" => {
                node_id = Some(
                    v.trim()
                        .parse::<i32>()
                        .map_err(|_| bad(format!("node.id {v:?} is not a number")))?,
                )
            }
            "cluster.id" => cluster_id = Some(v.trim().to_string()),
            "directory.id" => directory_id = Some(v.trim().to_string()),
            _ => {}
        }
    }
    let missing = |k: &str| Error::corrupt(path.display(), 0, format!("{k} is missing"));
    match version.as_deref() {
        Some("1") => {}
        Some(v) => {
            return Err(Error::corrupt(
                path.display(),
                0,
                format!("version {v} is not supported (this node reads version=1)"),
            ));
        }
        None => return Err(missing("version")),
    }
    Ok(Some(MetaProperties {
        node_id: node_id.ok_or_else(|| missing("node.id"))?,
        cluster_id: cluster_id.ok_or_else(|| missing("cluster.id"))?,
        directory_id,
    }))
}

/// Writes `<dir>/meta.properties` crash-safely (temp file, fsync, rename).
pub(crate) fn write(dir: &Path, props: &MetaProperties) -> Result<()> {
    use std::io::Write;
    let path = dir.join(FILE);
    let tmp = dir.join("meta.properties.tmp");
    let mut text = format!(
        "#\n#Written by tidelog\nversion=1\nnode.id={}\ncluster.id={}\n",
        props.node_id, props.cluster_id
    );
    if let Some(id) = &props.directory_id {
        text.push_str(&format!("directory.id={id}\n"));
    }
    {
        let mut f = std::fs::File::create(&tmp).ctx("create", &tmp)?;
        f.write_all(text.as_bytes()).ctx("write", &tmp)?;
        f.sync_all().ctx("fsync", &tmp)?;
    }
    std::fs::rename(&tmp, &path).ctx("rename into place", &path)?;
    crate::storage::sync_dir(dir)
}

/// This directory's id: the one `props` names, or a new one (a file written before
/// directory ids is rewritten with it; a directory without `meta.properties` gets it
/// written with the cluster id, once the node learns that).
pub(crate) fn directory_id(dir: &Path, props: &mut Option<MetaProperties>) -> Result<String> {
    if let Some(id) = props.as_ref().and_then(|p| p.directory_id.clone()) {
        return Ok(id);
    }
    let id = crate::storage::codec::uuid_base64(&crate::storage::codec::random_uuid());
    if let Some(p) = props {
        p.directory_id = Some(id.clone());
        write(dir, p)?;
    }
    Ok(id)
}

/// Checks that `dir` is node `node_id`'s (if it says whose it is).
pub(crate) fn check_node(dir: &Path, props: &MetaProperties, node_id: i32) -> Result<()> {
    if props.node_id != node_id {
        return Err(Error::InvalidConfig {
            key: "node.id".into(),
            reason: format!(
                "{} belongs to node {} of cluster {}, but this is node {node_id}",
                dir.display(),
                props.node_id,
                props.cluster_id
            ),
        });
    }
    Ok(())
}

/// The error of a node whose data directory is not the one the quorum knows it by:
/// `known` is the directory id the quorum recorded for `node_id`, `mine` this process's;
/// `voter` whether the node is a voter (else a broker-only node, a learner).
pub(crate) fn lost_directory(
    dir: &Path,
    node_id: i32,
    voter: bool,
    known: &str,
    mine: &str,
) -> Error {
    Error::InvalidConfig {
        key: "directory.id".into(),
        reason: format!(
            "the data directory of {} was lost or replaced: the quorum knows node {node_id} by directory id {known}, but {} has directory id {mine} (an empty directory gets a new one). {}",
            role(node_id, voter),
            dir.display(),
            recovery(node_id, voter)
        ),
    }
}

/// The error of a node told by the leader `leader` that it acknowledged metadata log
/// entries up to `acknowledged` while its log ends at `last`: the log (and with it the
/// data directory) was lost since, before the quorum recorded its directory id.
pub(crate) fn lost_log(
    dir: &Path,
    node_id: i32,
    voter: bool,
    leader: i32,
    acknowledged: u64,
    last: u64,
) -> Error {
    Error::InvalidConfig {
        key: "directory.id".into(),
        reason: format!(
            "the data directory of {} was lost or replaced: the controller (node {leader}) says node {node_id} acknowledged metadata log entries up to index {acknowledged}, but the metadata log in {} ends at index {last}. {}",
            role(node_id, voter),
            dir.display(),
            recovery(node_id, voter)
        ),
    }
}

/// The node as its role names it.
fn role(node_id: i32, voter: bool) -> String {
    if voter {
        format!("voter {node_id}")
    } else {
        format!("broker-only node {node_id}")
    }
}

/// Why a node that lost its disk stops, and how to bring it back.
fn recovery(node_id: i32, voter: bool) -> String {
    if voter {
        format!(
            "A voter that lost its disk must not vote as if new: it could elect a controller that lacks committed metadata, so this node does not take part in the quorum. To recover, restore the node's data directory (with its meta.properties and __cluster_metadata-0) from a backup, or remove node {node_id} from the voters (tidelog quorum remove-voter --node-id {node_id} --bootstrap ...), start it again on this directory (it joins as a broker only) and add it back (tidelog quorum add-voter --node-id {node_id})"
        )
    } else {
        format!(
            "A broker-only node does not vote, but the controller counts it as holding the metadata it acknowledged and would not send it again, so this node does not follow the metadata log. To recover, restore the node's data directory (with its meta.properties and __cluster_metadata-0) from a backup, or retire node {node_id} and start it anew: move its replicas away (tidelog cluster drain --node {node_id} --bootstrap ...), unregister it while it is stopped (tidelog cluster unregister --node {node_id} --bootstrap ...), then start it again on this directory (it joins as a new broker-only node)"
        )
    }
}

/// Checks that the cluster's id is the one `dir` was written for.
pub(crate) fn check_cluster(dir: &Path, props: &MetaProperties, cluster_id: &str) -> Result<()> {
    if props.cluster_id != cluster_id {
        return Err(Error::InvalidConfig {
            key: "cluster.id".into(),
            reason: format!(
                "{} belongs to cluster {}, but this node's metadata log is of cluster {cluster_id}",
                dir.display(),
                props.cluster_id
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let props = MetaProperties {
            node_id: 2,
            cluster_id: "AAAAAAAAAAAAAAAAAAAAAA".into(),
            directory_id: Some("BBBBBBBBBBBBBBBBBBBBBB".into()),
        };
        write(dir.path(), &props).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(text.contains(
            "version=1\nnode.id=2\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\ndirectory.id=BBBBBBBBBBBBBBBBBBBBBB\n"
        ));
        let back = read(dir.path()).unwrap().unwrap();
        assert_eq!(back, props);
        check_node(dir.path(), &back, 2).unwrap();
        let e = check_node(dir.path(), &back, 3).unwrap_err().to_string();
        assert!(e.contains("node 2") && e.contains("node 3"), "{e}");
        let e = check_cluster(dir.path(), &back, "other")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("AAAAAAAAAAAAAAAAAAAAAA") && e.contains("other"),
            "{e}"
        );
        // A file written before directory ids reads with none.
        std::fs::write(
            dir.path().join(FILE),
            "version=1\nnode.id=2\ncluster.id=a\n",
        )
        .unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().directory_id, None);
        std::fs::write(
            dir.path().join(FILE),
            "version=1\nnode.id=x\ncluster.id=a\n",
        )
        .unwrap();
        assert!(read(dir.path()).unwrap_err().is_corruption());
        std::fs::write(
            dir.path().join(FILE),
            "version=0\nnode.id=1\ncluster.id=a\n",
        )
        .unwrap();
        assert!(read(dir.path()).is_err());
    }

    #[test]
    fn a_directory_id_is_drawn_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        // An empty directory: an id in memory only (written with the cluster id).
        let mut none = None;
        let fresh = directory_id(dir.path(), &mut none).unwrap();
        assert_eq!(fresh.len(), 22);
        assert_eq!(read(dir.path()).unwrap(), None);
        // A file written before directory ids gets one, written at once and kept.
        std::fs::write(
            dir.path().join(FILE),
            "version=1\nnode.id=2\ncluster.id=a\n",
        )
        .unwrap();
        let mut props = read(dir.path()).unwrap();
        let id = directory_id(dir.path(), &mut props).unwrap();
        assert_ne!(id, fresh);
        assert_eq!(props.unwrap().directory_id.as_deref(), Some(id.as_str()));
        let mut again = read(dir.path()).unwrap();
        assert_eq!(
            again.as_ref().unwrap().directory_id.as_deref(),
            Some(id.as_str())
        );
        assert_eq!(directory_id(dir.path(), &mut again).unwrap(), id);
        // The error of a lost directory says what happened and what to do.
        let e = lost_directory(dir.path(), 2, true, &id, &fresh).to_string();
        assert!(
            e.contains("voter 2") && e.contains(&id) && e.contains(&fresh),
            "{e}"
        );
        assert!(
            e.contains("lost") && e.contains("restore") && e.contains("remove-voter --node-id 2"),
            "{e}"
        );
    }

    /// A broker-only node (a learner) is not told it votes, nor to change the voters.
    #[test]
    fn a_lost_directory_is_worded_by_role() {
        let dir = Path::new("/data/n4");
        for e in [
            lost_directory(dir, 4, false, "old", "new"),
            lost_log(dir, 4, false, 1, 40, 0),
        ] {
            let e = e.to_string();
            assert!(
                e.contains("broker-only node 4") && e.contains("lost"),
                "{e}"
            );
            assert!(!e.contains("voter"), "{e}");
            assert!(
                e.contains("restore")
                    && e.contains("cluster drain --node 4")
                    && e.contains("cluster unregister --node 4"),
                "{e}"
            );
        }
        let e = lost_log(dir, 3, true, 1, 40, 0).to_string();
        assert!(
            e.contains("voter 3") && e.contains("remove-voter --node-id 3"),
            "{e}"
        );
    }
}
