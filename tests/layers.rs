//! The crate's layers: each top-level module of `src/` (a folder, or a single file) is
//! one layer, and a layer imports only the layers below it. This test reads every
//! `src/**/*.rs` file, collects each `crate::…` path in its code (`use` lines, inline
//! paths and `crate::{a, b}` groups; names the crate root re-exports, such as
//! `crate::Broker`, are resolved through `src/lib.rs`), and fails naming the file and
//! line of every path that reaches a layer above its own.
//!
//! Test code may reach any layer to set up its scenario (a client's test starts a
//! server): files named `tests.rs` or `tests_*.rs`, files under a `tests/` folder, and
//! `#[cfg(test)]` modules are not checked. `src/lib.rs` (the crate root) and `src/bin/`
//! (the command line, a crate of its own) stand above every layer.
//!
//! [`LAYERS`] is the one table of the order; `docs/design.md` draws the same order in
//! its "Layers" section, and the last test here checks that the two agree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, bottom first: a module may import the modules before it in this list.
const LAYERS: &[&str] = &[
    "error",
    "metrics",
    "record",
    "storage",
    "config",
    "replica",
    "topic",
    "coordinator",
    "transaction",
    "broker",
    "producer",
    "consumer",
    "security",
    "client",
    "admin",
    "remote",
    "forward",
    "cluster",
    "server",
    "testing",
];

/// One Rust source file: its path relative to the package and its text.
struct Source {
    path: String,
    text: String,
}

/// Code of `text` with comments, string and character literals blanked out (replaced
/// by spaces, so lines and columns stay), and lifetimes kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !ident_char_before(&chars, i)
        {
            // A raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(_) => j += 1,
                }
            }
            for &ch in &chars[i..j.min(chars.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{7f}') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 2..chars.len()).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The top-level module (layer) a source file belongs to, None for the crate root and
/// the command line.
fn layer_of(path: &str) -> Option<String> {
    let rel = path.strip_prefix("src/")?;
    let first = rel.split('/').next()?;
    match first {
        "lib.rs" | "bin" => None,
        file if file.ends_with(".rs") && !rel.contains('/') => {
            Some(file.trim_end_matches(".rs").to_string())
        }
        dir => Some(dir.to_string()),
    }
}

/// True for a file that holds only tests.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "tests.rs" || name.starts_with("tests_") || path.contains("/tests/")
}

/// Blanks out every `#[cfg(test)]` module of `code` (already free of comments and
/// literals), so that only the library's own code is checked.
fn without_test_modules(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let text: String = out.iter().collect();
    let mut search = 0;
    while let Some(found) = text[search..].find("#[cfg(test)]") {
        let attr = search + found;
        search = attr + 1;
        // The item after the attribute (and any further attributes).
        let rest = &text[attr + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let item = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if !item.starts_with("mod ") {
            continue;
        }
        let Some(open) = rest.find(['{', ';']) else {
            continue;
        };
        if rest.as_bytes()[open] == b';' {
            continue; // `mod tests;`: a file of its own, found by its name
        }
        let start = attr + "#[cfg(test)]".len() + open;
        let mut depth = 0usize;
        let mut end = start;
        for (offset, ch) in text[start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + offset;
                        break;
                    }
                }
                _ => {}
            }
        }
        // `text` is ASCII where it matters; blank by char index.
        let (from, to) = (text[..attr].chars().count(), text[..=end].chars().count());
        for ch in &mut out[from..to] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    }
    out.into_iter().collect()
}

/// The first identifier of each item of a `{a, b::c, d as e}` group starting at
/// `group` (just after its `{`).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_item_start = true;
    let mut current = String::new();
    for ch in group.chars() {
        match ch {
            '{' => {
                depth += 1;
                at_item_start = false;
            }
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                if !current.is_empty() {
                    heads.push(std::mem::take(&mut current));
                }
                at_item_start = true;
            }
            c if at_item_start && (c.is_alphanumeric() || c == '_') => current.push(c),
            c if at_item_start && c.is_whitespace() && current.is_empty() => {}
            _ => {
                at_item_start = false;
            }
        }
    }
    if !current.is_empty() {
        heads.push(current);
    }
    heads
}

/// Every `crate::…` path in `code`: (line number, the first name after `crate::`).
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line_start) in line_starts(code).into_iter().enumerate() {
        let line_end = code[line_start..]
            .find('\n')
            .map_or(code.len(), |n| line_start + n);
        let line = &code[line_start..line_end];
        let mut from = 0;
        while let Some(at) = line[from..].find("crate::") {
            let at = from + at;
            from = at + "crate::".len();
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // e.g. `mycrate::`
            }
            let rest = &line[from..];
            if let Some(group) = rest.strip_prefix('{') {
                // The group may span lines: read on to its closing brace.
                let whole = &code[line_start + from + 1..];
                for head in group_heads(whole) {
                    found.push((index + 1, head));
                }
                let _ = group;
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((index + 1, name));
                }
            }
        }
    }
    found
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i <= text.len())
        .collect()
}

/// The names the crate root re-exports, with the module each comes from, and the
/// crate's top-level modules, both read from `src/lib.rs`.
fn root_names(lib: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let code = code_only(lib);
    let mut names = BTreeMap::new();
    let mut modules = Vec::new();
    let statements: Vec<&str> = code.split(';').collect();
    for statement in statements {
        let s = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        let s = s.rsplit(']').next().unwrap_or(&s).trim();
        if let Some(m) = s
            .strip_prefix("pub mod ")
            .or_else(|| s.strip_prefix("mod "))
            .filter(|m| m.chars().all(|c| c.is_alphanumeric() || c == '_'))
        {
            modules.push(m.to_string());
        }
        let Some(path) = s.strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_start_matches("crate::");
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        let items: Vec<String> = match rest.strip_prefix('{') {
            Some(group) => group
                .trim_end_matches('}')
                .split(',')
                .map(|i| i.trim().to_string())
                .collect(),
            None => vec![rest.to_string()],
        };
        for item in items {
            let name = item.rsplit(' ').next().unwrap_or(&item);
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() {
                names.insert(name.to_string(), module.to_string());
            }
        }
    }
    (names, modules)
}

/// Every import of a layer above the importing file's, as `file:line: message`.
fn violations(lib: &str, sources: &[Source]) -> Vec<String> {
    let (root, modules) = root_names(lib);
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut found = Vec::new();
    for module in &modules {
        if rank(module).is_none() {
            found.push(format!(
                "src/lib.rs: module `{module}` is in no layer: add it to LAYERS in tests/layers.rs and to docs/design.md"
            ));
        }
    }
    for source in sources {
        let Some(layer) = layer_of(&source.path) else {
            continue;
        };
        if is_test_file(&source.path) {
            continue;
        }
        let Some(own) = rank(&layer) else {
            found.push(format!(
                "{}: module `{layer}` is in no layer: add it to LAYERS in tests/layers.rs and to docs/design.md",
                source.path
            ));
            continue;
        };
        let code = without_test_modules(&code_only(&source.text));
        for (line, name) in crate_paths(&code) {
            if name == "self" || name == "super" {
                continue;
            }
            let target = if modules.contains(&name) {
                name.clone()
            } else if let Some(module) = root.get(&name) {
                module.clone()
            } else {
                found.push(format!(
                    "{}:{line}: `crate::{name}` is neither a module nor a name the crate root re-exports",
                    source.path
                ));
                continue;
            };
            match rank(&target) {
                Some(r) if r > own => found.push(format!(
                    "{}:{line}: `{layer}` imports `crate::{name}` of `{target}`, a layer above it",
                    source.path
                )),
                _ => {}
            }
        }
    }
    found
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

fn package_sources() -> (String, Vec<Source>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    rust_files(&root.join("src"), &mut paths);
    let sources = paths
        .into_iter()
        .map(|p| Source {
            path: p
                .strip_prefix(root)
                .expect("under the package")
                .to_string_lossy()
                .replace('\\', "/"),
            text: std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
        })
        .collect();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("read src/lib.rs");
    (lib, sources)
}

#[test]
fn every_layer_imports_only_the_layers_below_it() {
    let (lib, sources) = package_sources();
    assert!(sources.len() > 100, "found only {} files", sources.len());
    let found = violations(&lib, &sources);
    assert!(
        found.is_empty(),
        "imports against the layer order (tests/layers.rs, docs/design.md):\n{}",
        found.join("\n")
    );
}

const LIB: &str = "
mod broker;
pub mod storage;
mod record;
pub use broker::{Broker, BrokerBuilder};
pub use record::Batch;
";

fn source(path: &str, text: &str) -> Source {
    Source {
        path: path.to_string(),
        text: text.to_string(),
    }
}

#[test]
fn an_upward_import_is_named_with_its_file_and_line() {
    let sources = [
        source(
            "src/storage/log.rs",
            "use crate::record::Batch;\n\nfn f() -> crate::broker::Broker { x() }\n",
        ),
        source(
            "src/storage/scan.rs",
            "use crate::{record::Batch,\n    Broker};\n",
        ),
        source(
            "src/broker/mod.rs",
            "use crate::storage::PartitionLog;\nuse crate::Batch;\n",
        ),
    ];
    assert_eq!(
        violations(LIB, &sources),
        [
            "src/storage/log.rs:3: `storage` imports `crate::broker` of `broker`, a layer above it",
            "src/storage/scan.rs:1: `storage` imports `crate::Broker` of `broker`, a layer above it",
        ]
    );
}

#[test]
fn tests_comments_and_strings_may_name_any_layer() {
    let sources = [
        source(
            "src/record/mod.rs",
            "// crate::broker::Broker in a comment\n\
             /// [`Broker`](crate::broker::Broker) in a doc comment\n\
             const S: &str = \"crate::broker\";\n\
             const R: &str = r#\"crate::Broker\"#;\n\
             const C: char = '{';\n\
             fn f<'a>(x: &'a str) -> &'a str { x }\n\
             #[cfg(test)]\nmod tests {\n    use crate::broker::Broker;\n    fn g() { let _ = '}'; }\n}\n\
             fn after() -> crate::Broker { x() }\n",
        ),
        source("src/record/tests.rs", "use crate::broker::Broker;\n"),
        source("src/storage/tests/faults.rs", "use crate::Broker;\n"),
    ];
    assert_eq!(
        violations(LIB, &sources),
        ["src/record/mod.rs:12: `record` imports `crate::Broker` of `broker`, a layer above it"]
    );
}

#[test]
fn a_module_outside_the_table_and_an_unknown_name_are_errors() {
    let lib = format!("{LIB}mod gadget;\n");
    let sources = [
        source("src/gadget.rs", "use crate::record::Batch;\n"),
        source("src/record/mod.rs", "use crate::Nowhere;\n"),
    ];
    let found = violations(&lib, &sources);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("src/lib.rs: module `gadget` is in no layer"));
    assert!(found[1].starts_with("src/gadget.rs: module `gadget` is in no layer"));
    assert!(found[2].starts_with("src/record/mod.rs:1: `crate::Nowhere` is neither"));
}

/// The layers drawn in docs/design.md: the ```text block under "## Layers", one layer
/// a line, top first, each line starting with the layer's folder (`server/`) or file
/// (`config.rs`).
fn design_layers(design: &str) -> Vec<String> {
    let section: Vec<&str> = design
        .lines()
        .skip_while(|l| l.trim() != "## Layers")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    section
        .iter()
        .skip_while(|l| l.trim() != "```text")
        .skip(1)
        .take_while(|l| l.trim() != "```")
        .filter_map(|l| l.split_whitespace().next())
        .map(|w| w.trim_end_matches('/').trim_end_matches(".rs").to_string())
        .collect()
}

#[test]
fn docs_design_draws_the_same_layers() {
    let design =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design.md"))
            .expect("read docs/design.md");
    let mut drawn = design_layers(&design);
    drawn.reverse();
    let drawn: Vec<&str> = drawn
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("bin"))
        .collect();
    assert_eq!(
        drawn, LAYERS,
        "docs/design.md's Layers block (top first, bin/tidelog on top) must list LAYERS"
    );
}
