//! Share groups (KIP-932) through the admin client: the share-group offsets APIs of
//! Kafka 4.1 (DescribeShareGroupOffsets, AlterShareGroupOffsets,
//! DeleteShareGroupOffsets), sent to each group's coordinator as Kafka's
//! `Admin.listShareGroupOffsets`, `alterShareGroupOffsets` and
//! `deleteShareGroupOffsets` send them.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, GroupId, TopicName,
};

use super::router::{Outcome, check, kstr};
use super::{AdminClient, Each, TopicPartition, group, topic};
use crate::error::{Error, Resource, Result};

const DESCRIBE_VERSION: i16 = 0;
const ALTER_VERSION: i16 = 0;
const DELETE_VERSION: i16 = 0;

/// A share-partition's start offset (DescribeShareGroupOffsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupOffset {
    /// The partition.
    pub partition: TopicPartition,
    /// Its start offset: every record before it is acknowledged or archived. `None`
    /// for a partition the group never read.
    pub start_offset: Option<i64>,
    /// The leader epoch its state was last written at, if it has a state.
    pub leader_epoch: Option<i32>,
}

impl AdminClient {
    /// The start offsets of share group `group_id` (DescribeShareGroupOffsets, sent to
    /// the group's coordinator): of `partitions`, or of every share-partition with a
    /// state when `None`; sorted. A group with neither members nor state is refused
    /// with GROUP_ID_NOT_FOUND.
    pub fn describe_share_group_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Each<TopicPartition, ShareGroupOffset>> {
        let by_topic = by_topic(
            partitions
                .unwrap_or_default()
                .iter()
                .map(|tp| (tp, tp.partition)),
        );
        let topics = partitions.map(|_| {
            by_topic
                .iter()
                .map(|(t, p)| {
                    kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(kstr(*t)))
                        .with_partitions(p.clone())
                })
                .collect()
        });
        let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(kstr(group_id)))
                .with_topics(topics),
        ]);
        let mut answer = self
            .router
            .lock()
            .rounds(vec![group_id.to_string()], true, |r, _| {
                let one = |o: Outcome<Each<TopicPartition, ShareGroupOffset>>| {
                    Ok(vec![(group_id.to_string(), o)])
                };
                let addr = match r.coordinator(group_id)? {
                    Outcome::Done(Ok((_, addr))) => addr,
                    Outcome::Done(Err(e)) => return one(Outcome::Done(Err(e))),
                    Outcome::Retry(e) => return one(Outcome::Retry(e)),
                };
                let response = match r.call_addr(&addr, &request, DESCRIBE_VERSION) {
                    Ok(response) => response,
                    Err(e) => return one(Outcome::Retry(e)),
                };
                let Some(g) = response.groups.into_iter().next() else {
                    return one(Outcome::Retry(Error::Closed(
                        "an answer without the group".into(),
                    )));
                };
                if let Err(e) = check(|| group(group_id), g.error_code, g.error_message.as_ref()) {
                    return one(Err(e).into());
                }
                let mut out = Each::new();
                for t in g.topics {
                    for p in t.partitions {
                        let tp = TopicPartition::new(t.topic_name.0.to_string(), p.partition_index);
                        let part = tp.clone();
                        let found = check(
                            || Resource::Partition(part),
                            p.error_code,
                            p.error_message.as_ref(),
                        )
                        .map(|()| ShareGroupOffset {
                            partition: tp.clone(),
                            start_offset: Some(p.start_offset).filter(|o| *o >= 0),
                            leader_epoch: Some(p.leader_epoch).filter(|e| *e >= 0),
                        });
                        out.insert(tp, found.map_err(Error::from));
                    }
                }
                one(Outcome::Done(Ok(out)))
            })?;
        answer.remove(group_id).expect("one key")
    }

    /// Sets the start offsets of share group `group_id`, which must have no active
    /// member (AlterShareGroupOffsets, sent to the group's coordinator; what
    /// `kafka-share-groups --reset-offsets` does): each share-partition starts there
    /// again with no record in flight. A group with members is refused with
    /// NON_EMPTY_GROUP.
    pub fn alter_share_group_offsets(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<Each<TopicPartition>> {
        let keys: Vec<TopicPartition> = offsets.iter().map(|(tp, _)| tp.clone()).collect();
        super::unique(&keys, |tp| Resource::Partition(tp.clone()))?;
        let by_topic = by_topic(offsets.iter().map(|(tp, offset)| {
            (
                tp,
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(tp.partition)
                    .with_start_offset(*offset),
            )
        }));
        let request = AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(kstr(group_id)))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, p)| {
                        AlterShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(kstr(t)))
                            .with_partitions(p)
                    })
                    .collect(),
            );
        let answers = self.to_group_coordinator(group_id, &keys, &request, ALTER_VERSION)?;
        let response = match answers {
            Ok(response) => response,
            Err(outcomes) => return Ok(outcomes),
        };
        let group_error = (response.error_code, response.error_message);
        let mut out: Each<TopicPartition> = Each::new();
        for t in response.responses {
            for p in t.partitions {
                let tp = TopicPartition::new(t.topic_name.0.to_string(), p.partition_index);
                let part = tp.clone();
                let o = check(
                    || Resource::Partition(part),
                    p.error_code,
                    p.error_message.as_ref(),
                );
                out.insert(tp, o.map_err(Error::from));
            }
        }
        group_error_to_all(&mut out, &keys, group_id, group_error);
        Ok(out)
    }

    /// Deletes the share-partition states of whole topics of share group `group_id`,
    /// which must have no active member (DeleteShareGroupOffsets, sent to the group's
    /// coordinator): the group reads them next as topics it never read
    /// (`share.auto.offset.reset`). Each topic's outcome.
    pub fn delete_share_group_offsets(
        &self,
        group_id: &str,
        topics: &[&str],
    ) -> Result<Each<String>> {
        let keys: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        super::unique(&keys, |t| topic(t))?;
        let request = DeleteShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(kstr(group_id)))
            .with_topics(
                keys.iter()
                    .map(|t| {
                        DeleteShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(kstr(t)))
                    })
                    .collect(),
            );
        let response = match self.to_group_coordinator(group_id, &keys, &request, DELETE_VERSION)? {
            Ok(response) => response,
            Err(outcomes) => return Ok(outcomes),
        };
        let group_error = (response.error_code, response.error_message);
        let mut out: Each<String> = Each::new();
        for t in response.responses {
            let name = t.topic_name.0.to_string();
            let o = check(|| topic(&name), t.error_code, t.error_message.as_ref());
            out.insert(name, o.map_err(Error::from));
        }
        group_error_to_all(&mut out, &keys, group_id, group_error);
        Ok(out)
    }

    /// `request` sent to the coordinator of `group_id` (found again and retried while
    /// it moves): its answer, or the error of every key of `keys` when there is none.
    fn to_group_coordinator<R: kafka_protocol::protocol::Request, K: Ord + Clone, T>(
        &self,
        group_id: &str,
        keys: &[K],
        request: &R,
        version: i16,
    ) -> Result<std::result::Result<R::Response, Each<K, T>>> {
        let mut answer = self
            .router
            .lock()
            .rounds(vec![group_id.to_string()], true, |r, _| {
                let one = |o: Outcome<R::Response>| Ok(vec![(group_id.to_string(), o)]);
                let addr = match r.coordinator(group_id)? {
                    Outcome::Done(Ok((_, addr))) => addr,
                    Outcome::Done(Err(e)) => return one(Outcome::Done(Err(e))),
                    Outcome::Retry(e) => return one(Outcome::Retry(e)),
                };
                match r.call_addr(&addr, request, version) {
                    Ok(response) => one(Outcome::Done(Ok(response))),
                    Err(e) => one(Outcome::Retry(e)),
                }
            })?;
        Ok(match answer.remove(group_id).expect("one key") {
            Ok(response) => Ok(response),
            Err(e) => Err(keys.iter().map(|k| (k.clone(), Err(e.clone()))).collect()),
        })
    }
}

/// `items` (each a partition's entry) grouped by their partition's topic, in topic name
/// order: the topics of a request.
fn by_topic<'a, T>(
    items: impl Iterator<Item = (&'a TopicPartition, T)>,
) -> BTreeMap<&'a str, Vec<T>> {
    let mut grouped: BTreeMap<&str, Vec<T>> = BTreeMap::new();
    for (tp, item) in items {
        grouped.entry(&tp.topic).or_default().push(item);
    }
    grouped
}

/// A group-level error of an answer (its code, not 0, and message) is the outcome of
/// every key asked about, over what the answer said of each.
fn group_error_to_all<K: Ord + Clone>(
    out: &mut Each<K>,
    keys: &[K],
    group_id: &str,
    (code, message): (i16, Option<kafka_protocol::protocol::StrBytes>),
) {
    if code == 0 {
        return;
    }
    let e = check(|| group(group_id), code, message.as_ref());
    for k in keys {
        out.insert(k.clone(), e.clone().map_err(Error::from));
    }
}
