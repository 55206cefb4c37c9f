//! Every file under a directory with its bytes, to check that an operation left a data
//! directory byte for byte as it was.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Path (relative to `root`) and bytes of every file under `root`, directories as
/// `None`.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        let rel = path.strip_prefix(root).expect("under root").to_path_buf();
        if path.is_dir() {
            out.insert(rel, None);
            walk(root, &path, out);
        } else {
            out.insert(rel, Some(std::fs::read(&path).expect("read")));
        }
    }
}
