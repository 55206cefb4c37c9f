//! The `tidelog` command line end to end on a temp data directory: create → produce
//! from stdin → consume (formats, positions, counts) → describe → a consumer group
//! that continues where it stopped → groups describe and reset-offsets → dump of a
//! produced segment → consume refusing a corrupted segment.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, ok, tidelog};

#[test]
fn create_produce_consume_describe_groups_dump() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let t = |args: &[&str]| tidelog(&data, args, "");
    let t_in = |args: &[&str], input: &str| tidelog(&data, args, input);

    // Create: the global --data may also come after the subcommand.
    let out = ok(tidelog_after(
        &data,
        &[
            "topics",
            "create",
            "events",
            "--partitions",
            "2",
            "--config",
            "retention.ms=-1",
        ],
    ));
    assert_eq!(out.trim(), "Created topic events.");
    ok(t(&["topics", "create", "single"]));
    let list = ok(t(&["topics", "list", "--exclude-internal"]));
    assert_eq!(list, "events\nsingle\n");
    assert!(ok(t(&["topics", "list"])).contains("__consumer_offsets"));

    // Produce to partition 0 with keys and a header, then unkeyed lines to partition 1.
    ok(t_in(
        &[
            "produce",
            "events",
            "-K",
            ":",
            "--partition",
            "0",
            "-H",
            "src=cli",
        ],
        "k1:v1\nk2:v2\nk3:v3\nno-key-here\n",
    ));
    ok(t_in(&["produce", "events", "-p", "1"], "a\nb\n\nc\n"));

    // Consume everything with a kcat format.
    let out = ok(t(&[
        "consume",
        "events",
        "--from-beginning",
        "-e",
        "-f",
        "%t|%p|%o|%k|%s|%h|%K|%S\\n",
    ]));
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "events|0|0|k1|v1|src=cli|2|2",
            "events|0|1|k2|v2|src=cli|2|2",
            "events|0|2|k3|v3|src=cli|2|2",
            "events|0|3||no-key-here|src=cli|-1|11",
            "events|1|0||a||-1|1",
            "events|1|1||b||-1|1",
            "events|1|2||||-1|0",
            "events|1|3||c||-1|1",
        ]
    );
    // Default format is the value; -K prints key SEP value.
    let out = ok(t(&[
        "consume",
        "events",
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
    ]));
    assert_eq!(out, "v1\nv2\nv3\nno-key-here\n");
    let out = ok(t(&[
        "consume", "events", "-p", "0", "-o", "1", "-e", "-c", "2", "-K", "=",
    ]));
    assert_eq!(out, "k2=v2\nk3=v3\n");
    // -o -N: the last N of the partition; end: nothing.
    let out = ok(t(&["consume", "events", "-p", "1", "-o", "-2", "-e"]));
    assert_eq!(out, "\nc\n");
    assert_eq!(ok(t(&["consume", "events", "-o", "end", "-e"])), "");
    // --timestamp before every record: everything; far in the future: nothing.
    let out = ok(t(&[
        "consume",
        "events",
        "-p",
        "0",
        "--timestamp",
        "2000-01-01T00:00:00Z",
        "-e",
    ]));
    assert_eq!(out.lines().count(), 4);
    assert_eq!(
        ok(t(&[
            "consume",
            "events",
            "--timestamp",
            "4102444800000",
            "-e"
        ])),
        ""
    );

    // Describe: per partition offsets, size and segments.
    let out = ok(t(&["topics", "describe", "events"]));
    assert!(
        out.starts_with("Topic: events\tPartitionCount: 2\t"),
        "{out}"
    );
    assert!(out.contains("Configs: retention.ms=-1"), "{out}");
    assert!(
        out.contains("\tPartition: 0\tLogStartOffset: 0\tLogEndOffset: 4\tSize: "),
        "{out}"
    );
    assert!(
        out.contains("\tPartition: 1\tLogStartOffset: 0\tLogEndOffset: 4\t"),
        "{out}"
    );
    assert!(out.contains("\tSegments: 1"), "{out}");

    // A group: the first run prints 3 records and commits; the second continues.
    let group_run = |extra: &[&str]| {
        let mut args = vec![
            "consume",
            "events",
            "-g",
            "readers",
            "--from-beginning",
            "-e",
        ];
        args.extend_from_slice(&["-f", "%p:%o\\n"]);
        args.extend_from_slice(extra);
        ok(t(&args))
    };
    let first = group_run(&["-c", "3"]);
    assert_eq!(first.lines().count(), 3);
    let second = group_run(&[]);
    assert_eq!(second.lines().count(), 5, "{second}");
    let mut all: Vec<&str> = first.lines().chain(second.lines()).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 8, "no record twice, none missed");
    assert_eq!(ok(t(&["consume", "events", "-g", "readers", "-e"])), "");

    // groups list / describe: committed offsets at the end, lag 0.
    assert_eq!(ok(t(&["groups", "list"])), "readers\n");
    let out = ok(t(&["groups", "describe", "readers"]));
    assert!(out.contains("readers\tevents\t0\t4\t4\t0\t-"), "{out}");
    assert!(out.contains("readers\tevents\t1\t4\t4\t0\t-"), "{out}");

    // reset-offsets: a dry run changes nothing; to-offset, to-earliest, to-datetime.
    let out = ok(t(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "events",
        "--to-earliest",
        "--dry-run",
    ]));
    assert!(out.contains("readers\tevents\t0\t0"), "{out}");
    assert!(ok(t(&["groups", "describe", "readers"])).contains("readers\tevents\t0\t4\t4\t0"));
    ok(t(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "events",
        "-p",
        "0",
        "--to-offset",
        "2",
    ]));
    let out = ok(t(&["groups", "describe", "readers"]));
    assert!(out.contains("readers\tevents\t0\t2\t4\t2\t-"), "{out}");
    assert_eq!(
        ok(t(&["consume", "events", "-g", "readers", "-e"])),
        "v3\nno-key-here\n"
    );
    ok(t(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "events",
        "--to-datetime",
        "2000-01-01",
    ]));
    assert!(ok(t(&["groups", "describe", "readers"])).contains("readers\tevents\t1\t0\t4\t4\t-"));
    ok(t(&[
        "groups",
        "reset-offsets",
        "readers",
        "--topic",
        "events",
        "--to-latest",
    ]));
    assert!(ok(t(&["groups", "describe", "readers"])).contains("readers\tevents\t1\t4\t4\t0\t-"));
    err(
        t(&["groups", "describe", "nobody"]),
        1,
        "consumer group \"nobody\" does not exist",
    );

    // alter: grow the partition count; delete a topic.
    ok(t(&["topics", "alter", "events", "--partitions", "3"]));
    assert!(ok(t(&["topics", "describe", "events"])).contains("PartitionCount: 3"));
    err(
        t(&["topics", "alter", "events", "--partitions", "2"]),
        1,
        "can only grow",
    );
    ok(t(&["topics", "delete", "single"]));
    assert_eq!(ok(t(&["topics", "list", "--exclude-internal"])), "events\n");

    // dump of the segment the CLI produced.
    let seg = data.join("events-0").join(format!("{:020}.log", 0));
    let out = ok(t(&["dump", "--records", seg.to_str().unwrap()]));
    assert!(out.contains("| offset: 1 CreateTime: "), "{out}");
    assert!(
        out.contains("headers: [src=cli] key: k2 payload: v2"),
        "{out}"
    );
    assert!(out.contains("Summary: 1 batches, 4 records"), "{out}");

    // A corrupt batch on disk: consume names the file and position and prints nothing
    // of it. The only batch of events-1 has its last record's value byte flipped.
    let seg1 = data.join("events-1").join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&seg1).unwrap();
    let size = 12 + i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    bytes[size - 2] ^= 0x20;
    std::fs::write(&seg1, &bytes).unwrap();
    let run = t(&["consume", "events", "-p", "1", "--from-beginning", "-e"]);
    assert_eq!(run.stdout, "", "nothing of a corrupt batch is printed");
    let line = err(run, 1, "corrupt batch in ");
    assert!(
        line.contains("events-1") && line.contains("at byte 0"),
        "{line}"
    );
    assert!(line.contains("CRC-32C mismatch"), "{line}");
}

/// Runs with `--data` after the subcommand's arguments.
fn tidelog_after(data: &std::path::Path, args: &[&str]) -> cli_support::Run {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--data");
    all.push(data.to_str().unwrap());
    cli_support::tidelog_raw(&all, "")
}
