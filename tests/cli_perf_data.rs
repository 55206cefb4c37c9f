//! Where `tidelog perf` writes: without `--data` a mode that writes works in a temporary
//! directory that it names on stderr and removes afterwards, never in `./tidelog-data`;
//! a mode that reads an earlier run's topic asks for `--data`. `--partitions` that
//! disagrees with an existing topic is an error. Counts of one are singular.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{Run, err, json_number, ok, tidelog};
use std::path::Path;
use std::process::Command;

/// Runs `tidelog ARGS...` without `--data`, in `cwd`, with `TMPDIR=tmp`.
fn in_dir(cwd: &Path, tmp: &Path, args: &[&str]) -> Run {
    Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .args(args)
        .current_dir(cwd)
        .env("TMPDIR", tmp)
        .output()
        .expect("run tidelog")
        .into()
}

/// The entries of a directory.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn without_data_perf_works_in_a_temporary_directory_it_removes() {
    let root = tempfile::tempdir().unwrap();
    let (cwd, tmp) = (root.path().join("cwd"), root.path().join("tmp"));
    std::fs::create_dir(&cwd).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let small = ["--records", "1", "--record-size", "1"];

    let mut args = vec!["perf", "produce", "--topic", "bench"];
    args.extend_from_slice(&small);
    let run = in_dir(&cwd, &tmp, &args);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.starts_with("produce: 1 record of 1 byte in "),
        "{run:?}"
    );
    assert!(
        run.stderr.contains(&format!(
            "no --data given: working in the temporary directory {}",
            tmp.join("tidelog-perf-").display()
        )),
        "{run:?}"
    );
    assert!(run.stderr.contains("removed at the end"), "{run:?}");
    assert_eq!(entries(&tmp), Vec::<String>::new(), "removed afterwards");
    assert_eq!(
        entries(&cwd),
        Vec::<String>::new(),
        "nothing in ./tidelog-data"
    );

    // The other writing modes, on tiny runs: nothing is left either.
    let mut pubsub = vec!["perf", "pubsub", "--latency-records", "10"];
    pubsub.extend_from_slice(&small[..2]);
    pubsub.extend_from_slice(&["--record-size", "8"]);
    let open = ["perf", "open", "--partitions", "2"];
    let recover = ["perf", "recover", "--bytes", "4K"];
    for args in [&pubsub[..], &open, &recover] {
        let run = in_dir(&cwd, &tmp, args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        assert!(run.stderr.contains("temporary directory"), "{run:?}");
        assert_eq!(entries(&tmp), Vec::<String>::new(), "{args:?}");
        assert_eq!(entries(&cwd), Vec::<String>::new(), "{args:?}");
    }

    // Reading an earlier run's topic needs its directory.
    for mode in ["consume", "lookup"] {
        let run = in_dir(&cwd, &tmp, &["perf", mode, "--topic", "bench"]);
        err(run, 1, "give its --data DIR");
    }
}

#[test]
fn partitions_that_disagree_with_an_existing_topic_are_an_error() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let produce = |extra: &[&str]| {
        let mut args = vec![
            "perf",
            "produce",
            "--topic",
            "keyed",
            "--records",
            "100",
            "--record-size",
            "10",
            "--json",
        ];
        args.extend_from_slice(extra);
        tidelog(&data, &args, "")
    };
    let created = ok(produce(&["--partitions", "2"]));
    assert_eq!(json_number(&created, "partitions"), 2.0);
    err(
        produce(&["--partitions", "3"]),
        1,
        "topic \"keyed\" has 2 partitions, not the 3 of --partitions",
    );
    // Left out, the existing count is used.
    assert_eq!(json_number(&ok(produce(&[])), "partitions"), 2.0);
    ok(tidelog(&data, &["topics", "create", "one"], ""));
    err(
        tidelog(
            &data,
            &["perf", "open", "--topic", "one", "--partitions", "2"],
            "",
        ),
        1,
        "topic \"one\" has 1 partition, not the 2 of --partitions",
    );

    // The console producer counts in the singular too.
    let run = tidelog(&data, &["produce", "one"], "only\n");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "produced 1 record to topic one\n");
}
