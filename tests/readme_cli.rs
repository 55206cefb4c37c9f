//! The command-line blocks of README.md and docs/cli.md run as written when pasted into a
//! shell, against the built `tidelog` binary. README's tour (the ```sh block of its
//! "Command line" section) runs top to bottom twice in the same directory, each line
//! succeeding. docs/cli.md's `--bootstrap` block (its section "On a running node or
//! cluster") runs twice against a `tidelog serve` this test starts (its address put in
//! place of 127.0.0.1:9092). Its `perf` block (section "Measuring") runs once with its
//! `--records` counts scaled down to 2,000 (the sizes in the doc are for measuring; this
//! checks that every line runs). No output is asserted beyond what the tour's records and
//! group and the `--bootstrap` block's topic and group must show.
#![cfg(feature = "cli")]

#[cfg(feature = "server")]
mod cli_support;

use std::path::Path;
use std::process::Command;

/// The README section holding the tour.
const README_TOUR: (&str, &str) = ("README.md", "## Command line");
/// The docs/cli.md section holding the `--bootstrap` block.
#[cfg(feature = "server")]
const CLI_BOOTSTRAP: (&str, &str) = ("docs/cli.md", "## On a running node or cluster");
/// The docs/cli.md section holding the `perf` block.
const CLI_PERF: (&str, &str) = ("docs/cli.md", "## Measuring");

/// The ```sh blocks of the section of `file` (relative to the package directory) whose
/// heading starts with `heading`, up to the next `## ` heading.
fn sh_blocks((file, heading): (&str, &str)) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|e| panic!("read {file}: {e}"));
    assert!(
        text.lines().any(|l| l.starts_with(heading)),
        "{file} has no section {heading:?}"
    );
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in section {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(
        current.is_none(),
        "an unterminated ```sh block under {heading:?} in {file}"
    );
    blocks
}

/// Runs `script` with `sh -e` in `cwd`, the built binary first on the PATH.
fn run(cwd: &Path, script: &str) -> (String, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_tidelog"))
        .parent()
        .expect("binary directory");
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let out = Command::new("sh")
        .args(["-e", "-c", script])
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .expect("run sh");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "doc block failed ({})\n--- script\n{script}--- stdout\n{stdout}--- stderr\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

#[test]
fn the_command_line_blocks_run_as_written() {
    let tours = sh_blocks(README_TOUR);
    assert_eq!(tours.len(), 1, "README's tour alone: {tours:?}");
    let perfs = sh_blocks(CLI_PERF);
    assert_eq!(perfs.len(), 1, "docs/cli.md's perf block alone: {perfs:?}");
    let (tour, perf) = (&tours[0], &perfs[0]);
    assert!(
        tour.lines()
            .all(|l| l.starts_with("tidelog ") || l.starts_with("printf "))
    );

    let cwd = tempfile::tempdir().expect("temp dir");
    for run_number in 1..=2 {
        let (stdout, _) = run(cwd.path(), tour);
        // --from-beginning -e prints the record produced in this run, and so does the
        // group member: in the first run the group is new, in the second it continues
        // from the offsets the first run's reset-offsets moved back to 0.
        let printed = stdout.matches("signed up").count();
        assert_eq!(printed, 2, "run {run_number}:\n{stdout}");
        assert!(
            stdout.contains("audit\tevents\t"),
            "run {run_number}:\n{stdout}"
        );
    }
    assert!(
        cwd.path().join("tidelog-data").is_dir(),
        "the default --data"
    );

    let scaled: String = perf
        .lines()
        .map(|l| {
            let mut words: Vec<&str> = l.split(' ').collect();
            for i in 1..words.len() {
                if words[i - 1] == "--records" {
                    words[i] = "2000";
                }
            }
            words.join(" ") + "\n"
        })
        .collect();
    let cwd = tempfile::tempdir().expect("temp dir");
    let (stdout, _) = run(cwd.path(), &scaled);
    assert_eq!(
        stdout.matches("\"records\":2000,").count(),
        3,
        "the three --json lines: {stdout}"
    );
    assert!(
        !cwd.path().join("bench-data").exists(),
        "the block cleans up"
    );
    assert!(
        !cwd.path().join("tidelog-data").exists(),
        "perf left ./tidelog-data alone"
    );
}

#[cfg(feature = "server")]
#[test]
fn the_bootstrap_block_runs_against_a_running_node() {
    let blocks = sh_blocks(CLI_BOOTSTRAP);
    assert_eq!(
        blocks.len(),
        1,
        "docs/cli.md's --bootstrap block alone: {blocks:?}"
    );
    let block = &blocks[0];
    assert!(
        block
            .lines()
            .all(|l| l.starts_with("tidelog ") && l.contains(" --bootstrap 127.0.0.1:9092")),
        "every line acts on the node at 127.0.0.1:9092: {block}"
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    let node = cli_support::serve(&tmp.path().join("served"), &[]);
    let script = block.replace("127.0.0.1:9092", &node.addr);
    let cwd = tempfile::tempdir().expect("temp dir");
    for run_number in 1..=2 {
        let (stdout, _) = run(cwd.path(), &script);
        for expected in [
            "Created topic orders.\n",
            "\tTopic: orders\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0\tLogStartOffset: 0\tHighWatermark: 0\n",
            "Topic orders now has 6 partitions.\n",
            "audit\torders\t5\t0\n",
            "\naudit\n",
            "audit\torders\t5\t0\t0\t0\t-\n",
            "Deleted topic orders.\n",
        ] {
            assert!(
                stdout.contains(expected),
                "run {run_number} lacks {expected:?}:\n{stdout}"
            );
        }
    }
    assert!(
        !cwd.path().join("tidelog-data").exists(),
        "the block works on the node, not on a data directory"
    );
    assert_eq!(node.stop(), Some(0));
}
