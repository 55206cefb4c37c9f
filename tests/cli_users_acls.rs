//! `tidelog users` and `tidelog acls` on a data directory: credentials are stored as
//! salted keys (never the password), ACLs as kafka-acls shows them, and every mistake is
//! one `error:` line with nothing written.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, ok, tidelog};
use tidelog::security::{
    AclStore, CredentialStore, FileAclStore, FileCredentialStore, ScramMechanism,
};

#[test]
fn users_are_added_listed_and_deleted_as_salted_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let t = |args: &[&str], stdin: &str| tidelog(&data, args, stdin);

    // The password comes from standard input unless --password is given.
    let out = ok(t(&["users", "add", "alice"], "from-stdin\n"));
    assert!(out.contains("SCRAM-SHA-256, SCRAM-SHA-512"), "{out}");
    ok(t(
        &[
            "users",
            "add",
            "bob",
            "--password",
            "pw",
            "--mechanism",
            "scram-sha-256",
            "--iterations",
            "8192",
        ],
        "",
    ));
    assert_eq!(
        ok(t(&["users", "list"], "")),
        "alice SCRAM-SHA-256=iterations=4096,SCRAM-SHA-512=iterations=4096\n\
         bob SCRAM-SHA-256=iterations=8192\n"
    );
    let bytes = std::fs::read(data.join("users")).unwrap();
    assert!(
        !bytes.windows(10).any(|w| w == b"from-stdin"),
        "the password is not stored"
    );

    // What the CLI wrote is what the server checks passwords against.
    let store = FileCredentialStore::open(&data).unwrap();
    let cred = store.credential("alice", ScramMechanism::Sha512).unwrap();
    assert_eq!(cred.iterations, 4096);
    drop(store);

    ok(t(
        &["users", "delete", "alice", "--mechanism", "SCRAM-SHA-256"],
        "",
    ));
    assert!(ok(t(&["users", "list"], "")).starts_with("alice SCRAM-SHA-512=iterations=4096\n"));
    ok(t(&["users", "delete", "alice"], ""));
    assert_eq!(
        ok(t(&["users", "list"], "")),
        "bob SCRAM-SHA-256=iterations=8192\n"
    );

    err(
        t(&["users", "delete", "alice"], ""),
        1,
        "no such credential",
    );
    // A running server (here: this process holding the directory) keeps its own copy:
    // the commands refuse the directory rather than change it behind the server's back.
    let running = tidelog::Broker::open(&data).unwrap();
    err(
        t(&["users", "add", "carol", "--password", "x"], ""),
        1,
        "in use",
    );
    err(t(&["acls", "list"], ""), 1, "in use");
    drop(running);
    err(
        t(
            &[
                "users",
                "add",
                "carol",
                "--password",
                "x",
                "--iterations",
                "100",
            ],
            "",
        ),
        1,
        "too few",
    );
    err(
        t(
            &[
                "users",
                "add",
                "carol",
                "--password",
                "x",
                "--iterations",
                "20000",
            ],
            "",
        ),
        1,
        "too many",
    );
    err(
        t(
            &[
                "users",
                "add",
                "carol",
                "--mechanism",
                "MD5",
                "--password",
                "x",
            ],
            "",
        ),
        1,
        "MD5",
    );
    err(t(&["users", "add", "carol"], "\n"), 1, "empty password");
    assert!(!ok(t(&["users", "list"], "")).contains("carol"));
}

#[test]
fn acls_are_added_listed_and_removed_like_kafka_acls() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let t = |args: &[&str]| tidelog(&data, args, "");

    let out = ok(t(&[
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "app.",
        "--resource-pattern-type",
        "prefixed",
    ]));
    assert!(out.starts_with("added 2 ACLs\n"), "{out}");
    ok(t(&[
        "acls",
        "add",
        "--deny-principal",
        "User:bob",
        "--deny-host",
        "10.0.0.9",
        "--operation",
        "All",
        "--cluster",
    ]));
    ok(t(&[
        "acls",
        "add",
        "--allow-principal",
        "User:*",
        "--operation",
        "Read",
        "--group",
        "*",
    ]));

    let all = ok(t(&["acls", "list"]));
    assert!(all.contains(
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=app., patternType=PREFIXED)`:\n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
    ), "{all}");
    assert!(
        all.contains("(principal=User:bob, host=10.0.0.9, operation=ALL, permissionType=DENY)"),
        "{all}"
    );
    // A match filter finds what applies to one resource name; prefixed ones included.
    let matching = ok(t(&[
        "acls",
        "list",
        "--topic",
        "app.events",
        "--resource-pattern-type",
        "match",
    ]));
    assert!(matching.contains("name=app.,"), "{matching}");
    assert!(!matching.contains("CLUSTER"), "{matching}");
    assert_eq!(
        ok(t(&[
            "acls",
            "list",
            "--topic",
            "other",
            "--resource-pattern-type",
            "match"
        ])),
        ""
    );

    let removed = ok(t(&[
        "acls",
        "remove",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Describe",
    ]));
    assert!(removed.starts_with("removed 1 ACL\n"), "{removed}");
    let acls = FileAclStore::open(&data).unwrap();
    assert_eq!(acls.bindings().len(), 3);
    drop(acls);

    err(
        t(&[
            "acls",
            "add",
            "--allow-principal",
            "alice",
            "--operation",
            "Read",
            "--topic",
            "t",
        ]),
        1,
        "Type:name",
    );
    err(
        t(&[
            "acls",
            "add",
            "--allow-principal",
            "User:a",
            "--operation",
            "Fly",
            "--topic",
            "t",
        ]),
        1,
        "Fly",
    );
    err(
        t(&[
            "acls",
            "add",
            "--allow-principal",
            "User:a",
            "--operation",
            "Read",
        ]),
        1,
        "give a resource",
    );
    err(
        t(&[
            "acls",
            "add",
            "--allow-principal",
            "User:a",
            "--operation",
            "Read",
            "--topic",
            "t",
            "--group",
            "g",
        ]),
        1,
        "one resource",
    );
    err(
        t(&[
            "acls",
            "add",
            "--allow-principal",
            "User:a",
            "--operation",
            "Read",
            "--topic",
            "t",
            "--resource-pattern-type",
            "match",
        ]),
        1,
        "Literal or Prefixed",
    );
    err(t(&["acls", "remove"]), 1, "every ACL would go");
    assert_eq!(FileAclStore::open(&data).unwrap().bindings().len(), 3);
}
