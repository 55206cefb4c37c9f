//! Consumer-protocol groups (KIP-848) through the admin client: ConsumerGroupDescribe,
//! sent to each group's coordinator, as Kafka's `Admin.describeConsumerGroups` sends it
//! for groups of the new protocol.

use kafka_protocol::messages::consumer_group_describe_response::{Assignment, Member};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, GroupId};

use super::router::kstr;
use super::{AdminClient, Each, TopicPartition, described};
use crate::error::Result;

const CONSUMER_GROUP_DESCRIBE_VERSION: i16 = 0;

/// A consumer-protocol group (ConsumerGroupDescribe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state: `Empty`, `Assigning`, `Reconciling` or `Stable`.
    pub state: String,
    /// The group epoch: it moves whenever an input of the assignment changes.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The server-side assignor of the target assignment (`uniform`, `range`).
    pub assignor: String,
    /// Its members.
    pub members: Vec<ConsumerGroupMember>,
    /// Node id of its coordinator.
    pub coordinator: i32,
}

/// A member of a consumer-protocol group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMember {
    /// The member id.
    pub member_id: String,
    /// Its instance id, if it is a static member.
    pub instance_id: Option<String>,
    /// The member epoch: the target epoch it has reconciled to.
    pub member_epoch: i32,
    /// Its client id.
    pub client_id: String,
    /// Its host.
    pub host: String,
    /// The topics it subscribed to by name.
    pub subscribed_topic_names: Vec<String>,
    /// The regular expression it subscribed with, if any.
    pub subscribed_topic_regex: Option<String>,
    /// The partitions it owns now, sorted.
    pub assignment: Vec<TopicPartition>,
    /// The partitions the target assignment gives it, sorted.
    pub target_assignment: Vec<TopicPartition>,
}

/// An assignment of the wire (topics by id and name) as sorted partitions.
fn partitions(a: Assignment) -> Vec<TopicPartition> {
    let mut out: Vec<TopicPartition> = a
        .topic_partitions
        .into_iter()
        .flat_map(|tp| {
            let topic = tp.topic_name.0.to_string();
            tp.partitions
                .into_iter()
                .map(move |p| TopicPartition::new(topic.clone(), p))
        })
        .collect();
    out.sort();
    out
}

/// A member of the wire as [`ConsumerGroupMember`].
fn member(m: Member) -> ConsumerGroupMember {
    ConsumerGroupMember {
        member_id: m.member_id.to_string(),
        instance_id: m.instance_id.map(|s| s.to_string()),
        member_epoch: m.member_epoch,
        client_id: m.client_id.to_string(),
        host: m.client_host.to_string(),
        subscribed_topic_names: m
            .subscribed_topic_names
            .into_iter()
            .map(|t| t.0.to_string())
            .collect(),
        subscribed_topic_regex: m.subscribed_topic_regex.map(|s| s.to_string()),
        assignment: partitions(m.assignment),
        target_assignment: partitions(m.target_assignment),
    }
}

impl AdminClient {
    /// Each consumer-protocol group's state, epochs, assignor and members with their
    /// subscriptions and current and target assignments (ConsumerGroupDescribe, sent to
    /// the group's coordinator). A group that is not a consumer-protocol group, or that
    /// the coordinator does not know, is refused with GROUP_ID_NOT_FOUND, as Kafka does;
    /// a classic group is described by [`AdminClient::describe_groups`].
    pub fn describe_consumer_groups(
        &self,
        groups: &[&str],
    ) -> Result<Each<String, ConsumerGroupDescription>> {
        self.to_coordinators(
            groups,
            CONSUMER_GROUP_DESCRIBE_VERSION,
            |id| ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(kstr(id))]),
            |node, response| {
                described(response.groups, |gid, g| ConsumerGroupDescription {
                    group_id: gid,
                    state: g.group_state.to_string(),
                    group_epoch: g.group_epoch,
                    assignment_epoch: g.assignment_epoch,
                    assignor: g.assignor_name.to_string(),
                    members: g.members.into_iter().map(member).collect(),
                    coordinator: node,
                })
            },
        )
    }
}
