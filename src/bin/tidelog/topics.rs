//! `tidelog topics create|list|describe|delete|alter`, as kafka-topics.

use crate::cli::TopicsCmd;
use crate::common::{close_broker, counted, open_broker, parse_kv};
use crate::out::Out;
use crate::{CliResult, fail};
use std::path::{Path, PathBuf};
use tidelog::{Broker, TopicConfig, TopicDescription};

/// Runs `tidelog topics ...`.
pub(crate) fn run(data: &Path, cmd: &TopicsCmd) -> CliResult {
    // A topic to create is checked before the data directory is opened (or created):
    // a bad name, key or value writes nothing.
    let mut new_config = TopicConfig::new();
    if let TopicsCmd::Create {
        name,
        config,
        partitions,
        ..
    } = cmd
    {
        tidelog::validate_topic_name(name)?;
        if *partitions < 1 {
            return Err(fail!(
                "--partitions must be at least 1 for topic {name:?}, not {partitions}"
            ));
        }
        for kv in config {
            let (k, v) = parse_kv(kv, "--config")?;
            new_config = new_config.set(&k, v);
        }
        new_config.validate()?;
    }
    let create = matches!(cmd, TopicsCmd::Create { .. });
    let broker = open_broker(data, create)?;
    let mut out = Out::new();
    match cmd {
        TopicsCmd::Create {
            name,
            partitions,
            if_not_exists,
            ..
        } => {
            let tc = std::mem::take(&mut new_config);
            if *if_not_exists && broker.topics().iter().any(|t| t == name) {
                out.line(format_args!("Topic {name} already exists."))?;
            } else {
                broker.create_topic(name, *partitions, tc)?;
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
    for n in broker.topics() {
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
    for p in &d.partitions {
        out.line(format_args!(
            "\tTopic: {}\tPartition: {}\tLogStartOffset: {}\tLogEndOffset: {}\tSize: {}\tSegments: {}",
            d.name, p.partition, p.log_start_offset, p.log_end_offset, p.size_bytes, p.segments
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
