//! `tidelog topics create|list|describe|delete|alter`, as kafka-topics: on a data
//! directory, or with `--bootstrap` on a running node or cluster over the Kafka protocol
//! (`tidelog::admin::AdminClient`).

use crate::cli::{TopicsArgs, TopicsCmd};
use crate::common::{
    close_broker, counted, data_dir, open_broker, open_broker_read_only, parse_kv,
};
use crate::out::Out;
use crate::{CliResult, fail};
use std::path::{Path, PathBuf};
use tidelog::{Broker, TopicConfig, TopicDescription};

/// Runs `tidelog topics ...`; `data` is `--data` if it was given.
pub(crate) fn run(data: Option<&Path>, args: &TopicsArgs) -> CliResult {
    let cmd = &args.cmd;
    if let TopicsCmd::Create {
        name,
        partitions,
        replication_factor,
        ..
    } = cmd
    {
        check_new_topic(name, *partitions, *replication_factor)?;
    }
    if let Some(bootstrap) = &args.target.bootstrap {
        return remote::run(bootstrap, &args.target, data, cmd);
    }
    let data = data_dir(data);
    // A topic to create is checked before the data directory is opened (or created):
    // a bad name, key or value writes nothing.
    let mut new_config = TopicConfig::new();
    if let TopicsCmd::Create {
        name,
        config,
        replication_factor,
        ..
    } = cmd
    {
        if let Some(rf) = replication_factor
            && *rf != 1
        {
            return Err(fail!(
                "a data directory holds one replica of topic {name:?}: --replication-factor {rf} needs --bootstrap and a cluster of at least {rf} nodes"
            ));
        }
        for kv in config {
            let (k, v) = parse_kv(kv, "--config")?;
            new_config = new_config.set(&k, v);
        }
        new_config.validate()?;
    }
    let create = matches!(cmd, TopicsCmd::Create { .. });
    let broker = if matches!(cmd, TopicsCmd::List { .. } | TopicsCmd::Describe { .. }) {
        open_broker_read_only(data)?
    } else {
        open_broker(data, create)?
    };
    let mut out = Out::new();
    match cmd {
        TopicsCmd::Create {
            name,
            partitions,
            if_not_exists,
            ..
        } => {
            let tc = std::mem::take(&mut new_config);
            if *if_not_exists && broker.topics()?.iter().any(|t| t == name) {
                out.line(format_args!("Topic {name} already exists."))?;
            } else {
                broker.create_topic(name, partitions.unwrap_or(1), tc)?;
                out.line(format_args!("Created topic {name}."))?;
            }
        }
        TopicsCmd::List { exclude_internal } => {
            for name in topic_names(&broker, *exclude_internal)? {
                out.line(name)?;
            }
        }
        TopicsCmd::Describe {
            name,
            exclude_internal,
        } => {
            let names = match name {
                Some(n) => vec![n.clone()],
                None => topic_names(&broker, *exclude_internal)?,
            };
            for n in names {
                describe(&mut out, &broker.describe_topic(&n)?)?;
            }
        }
        TopicsCmd::Delete { name } => {
            delete_topic(&broker, name)?;
            out.line(format_args!("Deleted topic {name}."))?;
        }
        TopicsCmd::Alter {
            name,
            config,
            delete_config,
            partitions,
        } => alter(&broker, &mut out, name, config, delete_config, *partitions)?,
    }
    out.flush()?;
    drop(out);
    close_broker(broker)
}

/// Checks a topic to create: its name, and the counts given.
fn check_new_topic(name: &str, partitions: Option<i32>, replication: Option<i16>) -> CliResult {
    tidelog::validate_topic_name(name)?;
    if let Some(p) = partitions
        && p < 1
    {
        return Err(fail!(
            "--partitions must be at least 1 for topic {name:?}, not {p}"
        ));
    }
    if let Some(rf) = replication
        && rf < 1
    {
        return Err(fail!(
            "--replication-factor must be at least 1 for topic {name:?}, not {rf}"
        ));
    }
    Ok(())
}

/// Deletes topic `name`; on a terminal, when that takes a while, shows how much of its
/// files are gone.
fn delete_topic(broker: &Broker, name: &str) -> CliResult {
    let dirs: Vec<PathBuf> = broker
        .describe_topic(name)?
        .partitions
        .iter()
        .map(|p| broker.dir().join(format!("{name}-{}", p.partition)))
        .collect();
    let total = bytes_in(&dirs);
    crate::progress::while_running(
        format!("deleting topic {name}"),
        crate::progress::Unit::Bytes,
        Some(total),
        || total.saturating_sub(bytes_in(&dirs)),
        || broker.delete_topic(name),
    )?;
    Ok(())
}

/// Bytes of the files in `dirs` (those still there).
fn bytes_in(dirs: &[PathBuf]) -> u64 {
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn topic_names(broker: &Broker, exclude_internal: bool) -> CliResult<Vec<String>> {
    let mut names = Vec::new();
    for n in broker.topics()? {
        if exclude_internal && broker.topic(&n)?.is_internal() {
            continue;
        }
        names.push(n);
    }
    Ok(names)
}

/// kafka-topics --describe's layout: a topic line, then one tab-indented line per
/// partition.
fn describe(out: &mut Out, d: &TopicDescription) -> CliResult {
    let configs: Vec<String> = d
        .config
        .overrides()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    out.line(format_args!(
        "Topic: {}\tPartitionCount: {}\tInternal: {}\tConfigs: {}",
        d.name,
        d.partitions.len(),
        d.internal,
        configs.join(",")
    ))?;
    let known = |n: Option<String>| n.unwrap_or_else(|| "-".into());
    for p in &d.partitions {
        out.line(format_args!(
            "\tTopic: {}\tPartition: {}\tLogStartOffset: {}\tLogEndOffset: {}\tSize: {}\tSegments: {}",
            d.name,
            p.partition,
            p.log_start_offset,
            p.log_end_offset,
            known(p.size_bytes.map(|n| n.to_string())),
            known(p.segments.map(|n| n.to_string()))
        ))?;
    }
    Ok(())
}

fn alter(
    broker: &Broker,
    out: &mut Out,
    name: &str,
    config: &[String],
    delete_config: &[String],
    partitions: Option<i32>,
) -> CliResult {
    let topic = broker.topic(name)?;
    if !config.is_empty() || !delete_config.is_empty() {
        // Build the whole new override set and check it before changing anything.
        let mut pairs: Vec<(String, String)> = topic
            .config()
            .overrides()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for key in delete_config {
            let before = pairs.len();
            pairs.retain(|(k, _)| k != key);
            if pairs.len() == before {
                return Err(fail!("topic {name:?} has no setting {key:?} to delete"));
            }
        }
        for kv in config {
            let (k, v) = parse_kv(kv, "--config")?;
            pairs.retain(|(old, _)| *old != k);
            pairs.push((k, v));
        }
        let mut tc = TopicConfig::new();
        for (k, v) in &pairs {
            tc = tc.set(k, v);
        }
        tc.validate()?;
        if let Some(n) = partitions
            && n <= topic.partition_count()
        {
            return Err(fail!(
                "topic {name:?} has {}; it can only grow, not to {n}",
                counted(topic.partition_count() as u64, "partition", "partitions")
            ));
        }
        apply_topic_config(broker, name, tc)?;
        out.line(format_args!("Updated the settings of topic {name}."))?;
    }
    if let Some(n) = partitions {
        broker.add_partitions(name, n)?;
        out.line(format_args!(
            "Topic {name} now has {}.",
            counted(n as u64, "partition", "partitions")
        ))?;
    }
    Ok(())
}

/// Replaces a topic's overrides. The Broker does not offer this yet: until it does, the
/// command refuses (having changed nothing) rather than change only the open logs.
fn apply_topic_config(broker: &Broker, name: &str, config: TopicConfig) -> CliResult {
    broker.alter_topic_config(name, config)?;
    Ok(())
}

/// The topic commands on a running node or cluster (`--bootstrap`).
#[cfg(feature = "server")]
mod remote {
    use super::{CliResult, Out, TopicsCmd, counted, fail, parse_kv};
    use crate::common::{admin_client, only};
    use std::collections::BTreeMap;
    use std::path::Path;
    use tidelog::admin::{
        AdminClient, AdminError, AlterConfigOp, ConfigSource, ErrorCode, NewTopic, OffsetSpec,
        Resource, TopicMetadata, TopicPartition,
    };

    /// Runs `tidelog topics --bootstrap ADDRS ...`.
    pub(super) fn run(
        bootstrap: &str,
        target: &crate::cli::Bootstrap,
        data: Option<&Path>,
        cmd: &TopicsCmd,
    ) -> CliResult {
        let admin = admin_client(bootstrap, target, data)?;
        let mut out = Out::new();
        match cmd {
            TopicsCmd::Create {
                name,
                partitions,
                replication_factor,
                config,
                if_not_exists,
            } => {
                let mut topic = NewTopic::new(name.as_str());
                topic.partitions = *partitions;
                topic.replication_factor = *replication_factor;
                for kv in config {
                    let (k, v) = parse_kv(kv, "--config")?;
                    topic = topic.config(k, v);
                }
                match only(admin.create_topics(&[topic])?, name) {
                    Err(tidelog::Error::Admin(e))
                        if *if_not_exists && e.code == ErrorCode::TOPIC_ALREADY_EXISTS =>
                    {
                        out.line(format_args!("Topic {name} already exists."))?;
                    }
                    result => {
                        result?;
                        out.line(format_args!("Created topic {name}."))?;
                    }
                }
            }
            TopicsCmd::List { exclude_internal } => {
                for t in admin.metadata()?.topics {
                    if !(*exclude_internal && t.internal) {
                        out.line(t.name)?;
                    }
                }
            }
            TopicsCmd::Describe {
                name,
                exclude_internal,
            } => {
                let topics = match name {
                    Some(n) => vec![only(admin.describe_topics(&[n.as_str()])?, n)?],
                    None => admin
                        .metadata()?
                        .topics
                        .into_iter()
                        .filter(|t| !(*exclude_internal && t.internal))
                        .collect(),
                };
                describe(&admin, &mut out, &topics)?;
            }
            TopicsCmd::Delete { name } => {
                only(admin.delete_topics(&[name.as_str()])?, name)?;
                out.line(format_args!("Deleted topic {name}."))?;
            }
            TopicsCmd::Alter {
                name,
                config,
                delete_config,
                partitions,
            } => alter(&admin, &mut out, name, config, delete_config, *partitions)?,
        }
        out.flush()
    }

    /// kafka-topics --describe's layout (a topic line, then one tab-indented line per
    /// partition with its leader, replicas and in-sync replicas), with each partition's
    /// log start offset and high watermark from ListOffsets ("-" where its leader could
    /// not answer).
    fn describe(admin: &AdminClient, out: &mut Out, topics: &[TopicMetadata]) -> CliResult {
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        let configs = if names.is_empty() {
            BTreeMap::new()
        } else {
            admin.describe_configs(&names)?
        };
        let mut specs = Vec::new();
        for t in topics {
            for p in &t.partitions {
                let tp = TopicPartition::new(t.name.as_str(), p.partition);
                specs.push((tp.clone(), OffsetSpec::Earliest));
            }
        }
        let start = admin.list_offsets(&specs)?;
        for s in &mut specs {
            s.1 = OffsetSpec::Latest;
        }
        let end = admin.list_offsets(&specs)?;
        let offset = |m: &BTreeMap<TopicPartition, tidelog::Result<_>>, tp: &TopicPartition| match m
            .get(tp)
        {
            Some(Ok(tidelog::admin::ListedOffset {
                offset: Some(o), ..
            })) => o.to_string(),
            _ => "-".to_string(),
        };
        let ids = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        for t in topics {
            let overrides: Vec<String> = match configs.get(&t.name) {
                Some(Ok(entries)) => entries
                    .iter()
                    .filter(|c| c.source == ConfigSource::Topic)
                    .map(|c| format!("{}={}", c.name, c.value.as_deref().unwrap_or("")))
                    .collect(),
                Some(Err(e)) => return Err(e.clone().into()),
                None => Vec::new(),
            };
            out.line(format_args!(
                "Topic: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
                t.name,
                t.partitions.len(),
                t.replication_factor(),
                overrides.join(",")
            ))?;
            for p in &t.partitions {
                let tp = TopicPartition::new(t.name.as_str(), p.partition);
                let leader = p
                    .leader
                    .map_or_else(|| "none".to_string(), |l| l.to_string());
                let offline = if p.offline_replicas.is_empty() {
                    String::new()
                } else {
                    format!("\tOffline: {}", ids(&p.offline_replicas))
                };
                out.line(format_args!(
                    "\tTopic: {}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}{offline}\tLogStartOffset: {}\tHighWatermark: {}",
                    t.name,
                    p.partition,
                    ids(&p.replicas),
                    ids(&p.isr),
                    offset(&start, &tp),
                    offset(&end, &tp),
                ))?;
            }
        }
        Ok(())
    }

    /// Changes a topic's settings (IncrementalAlterConfigs) and grows it
    /// (CreatePartitions); both are checked before either is made.
    fn alter(
        admin: &AdminClient,
        out: &mut Out,
        name: &str,
        config: &[String],
        delete_config: &[String],
        partitions: Option<i32>,
    ) -> CliResult {
        let mut ops = Vec::new();
        for kv in config {
            let (k, v) = parse_kv(kv, "--config")?;
            ops.push(AlterConfigOp::Set(k, v));
        }
        if let Some(n) = partitions {
            let current = only(admin.describe_topics(&[name])?, name)?
                .partitions
                .len();
            if n as usize <= current {
                let reason = format!(
                    "it has {}; it can only grow, not to {n}",
                    counted(current as u64, "partition", "partitions")
                );
                let e = AdminError::new(
                    Resource::Topic(name.to_string()),
                    ErrorCode::INVALID_PARTITIONS,
                    Some(reason),
                );
                return Err(tidelog::Error::from(e).into());
            }
        }
        if !delete_config.is_empty() {
            let entries = only(admin.describe_configs(&[name])?, name)?;
            for key in delete_config {
                if !entries
                    .iter()
                    .any(|c| &c.name == key && c.source == ConfigSource::Topic)
                {
                    return Err(fail!("topic {name:?} has no setting {key:?} to delete"));
                }
                ops.push(AlterConfigOp::Delete(key.clone()));
            }
        }
        if !ops.is_empty() {
            only(admin.alter_configs(&[(name, ops)])?, name)?;
            out.line(format_args!("Updated the settings of topic {name}."))?;
        }
        if let Some(n) = partitions {
            only(admin.create_partitions(&[(name, n)])?, name)?;
            out.line(format_args!(
                "Topic {name} now has {}.",
                counted(n as u64, "partition", "partitions")
            ))?;
        }
        Ok(())
    }
}

/// Without the `server` feature there is no Kafka client: `--bootstrap` is refused.
#[cfg(not(feature = "server"))]
mod remote {
    use super::{CliResult, TopicsCmd};
    use std::path::Path;

    pub(super) fn run(
        _: &str,
        _: &crate::cli::Bootstrap,
        _: Option<&Path>,
        _: &TopicsCmd,
    ) -> CliResult {
        Err(crate::common::no_admin_client())
    }
}
