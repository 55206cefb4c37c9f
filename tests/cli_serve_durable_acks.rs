//! `tidelog serve --log-durable-acks`: the broker-wide default of the `durable.acks`
//! topic setting (`log.durable.acks`). A topic without its own `durable.acks` takes it;
//! a topic's override wins.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
use cli_support::serve;
use tidelog::admin::{AdminClient, ConfigSource, NewTopic};

/// `durable.acks` of `topic` as DescribeConfigs reports it: value and source.
fn durable_acks(admin: &AdminClient, topic: &str) -> (String, ConfigSource) {
    let configs = admin.describe_configs(&[topic]).unwrap();
    let entries = configs[topic].as_ref().unwrap();
    let e = entries
        .iter()
        .find(|c| c.name == "durable.acks")
        .expect("durable.acks is described");
    (e.value.clone().unwrap_or_default(), e.source)
}

fn topics_on(args: &[&str]) -> [(String, ConfigSource); 2] {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("data"), args);
    let admin = AdminClient::builder(server.addr.clone()).connect().unwrap();
    let created = admin
        .create_topics(&[
            NewTopic::new("plain"),
            NewTopic::new("own").config("durable.acks", "false"),
        ])
        .unwrap();
    assert!(created.values().all(Result::is_ok), "{created:?}");
    let out = [durable_acks(&admin, "plain"), durable_acks(&admin, "own")];
    drop(admin);
    assert_eq!(server.stop(), Some(0));
    out
}

#[test]
fn log_durable_acks_is_the_default_of_every_topic_without_its_own() {
    let [plain, own] = topics_on(&["--log-durable-acks"]);
    assert_eq!(
        plain.0, "true",
        "a topic without durable.acks takes the default"
    );
    assert_ne!(plain.1, ConfigSource::Topic);
    assert_eq!(
        own,
        ("false".to_string(), ConfigSource::Topic),
        "an override wins"
    );

    let [plain, _] = topics_on(&[]);
    assert_eq!(plain.0, "false", "without the flag: Kafka's behaviour");
}
