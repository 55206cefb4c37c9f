//! `meta.properties` in a cluster node's data directory, in Kafka's format (a Java
//! properties file with `version=1`, `node.id=` and `cluster.id=`). Written once the
//! node learns the cluster id; checked at every start, so a node refuses a data directory
//! of another node or cluster.

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
    }))
}

/// Writes `<dir>/meta.properties` crash-safely (temp file, fsync, rename).
pub(crate) fn write(dir: &Path, props: &MetaProperties) -> Result<()> {
    use std::io::Write;
    let path = dir.join(FILE);
    let tmp = dir.join("meta.properties.tmp");
    let text = format!(
        "#\n#Written by tidelog\nversion=1\nnode.id={}\ncluster.id={}\n",
        props.node_id, props.cluster_id
    );
    {
        let mut f = std::fs::File::create(&tmp).ctx("create", &tmp)?;
        f.write_all(text.as_bytes()).ctx("write", &tmp)?;
        f.sync_all().ctx("fsync", &tmp)?;
    }
    std::fs::rename(&tmp, &path).ctx("rename into place", &path)?;
    crate::storage::sync_dir(dir)
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
        };
        write(dir.path(), &props).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(text.contains("version=1\nnode.id=2\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n"));
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
}
