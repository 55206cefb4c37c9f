//! README.md's command-line blocks (the ```sh blocks of its "Command line" section) run
//! as written when pasted into a shell, against the built `tidelog` binary: the tour
//! runs top to bottom twice in the same directory, each line succeeding. The
//! `--bootstrap` block runs twice against a `tidelog serve` this test starts (its address
//! put in place of 127.0.0.1:9092). The `perf` block runs once with its `--records`
//! counts scaled down to 2,000 (the README's sizes are for measuring; this checks that
//! every line runs). No output is asserted beyond what the tour's records and group and
//! the `--bootstrap` block's topic and group must show.
#![cfg(feature = "cli")]

#[cfg(feature = "server")]
mod cli_support;

use std::path::Path;
use std::process::Command;

/// The ```sh blocks of the README section whose heading starts with `heading`.
fn sh_blocks(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("read README.md");
    let section: Vec<&str> = readme
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
        "an unterminated ```sh block under {heading:?}"
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
        "README block failed ({})\n--- script\n{script}--- stdout\n{stdout}--- stderr\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

#[test]
fn the_command_line_blocks_run_as_written() {
    let blocks = sh_blocks("## Command line");
    assert_eq!(
        blocks.len(),
        3,
        "the tour, the --bootstrap block (run by the next test) and the perf block: {blocks:?}"
    );
    let (tour, perf) = (&blocks[0], &blocks[2]);
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
    let blocks = sh_blocks("## Command line");
    let block = &blocks[1];
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
