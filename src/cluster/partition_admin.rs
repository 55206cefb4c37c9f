//! The operator's partition calls on a cluster node: leader elections (Kafka's
//! ElectLeaders) and replica reassignments (KIP-455's AlterPartitionReassignments and
//! ListPartitionReassignments), each a metadata record proposed to the controller and
//! answered from the image this node applied (`image/reassign.rs` holds the rules).

use std::time::Duration;

use super::ClusterNode;
use super::image::{MetadataImage, NO_LEADER, PartitionImage};
use super::records::{MetadataRecord, PartitionRef};
use crate::error::{Error, Result};

/// Which leader an election picks (Kafka's `ElectionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElectionType {
    /// The preferred replica (the first of the replicas), if it is an unfenced ISR
    /// member.
    Preferred,
    /// For a partition without a leader, any unfenced replica, in or out of the ISR:
    /// records only the old ISR had are lost.
    Unclean,
}

/// How one partition's election ended.
#[derive(Debug, Clone)]
pub(crate) enum ElectionOutcome {
    /// The partition is led as asked.
    Elected,
    /// Nothing to do: the preferred replica leads already (preferred), or the
    /// partition has a leader (unclean). Kafka's ELECTION_NOT_NEEDED.
    NotNeeded,
    /// The preferred replica is fenced or out of the ISR (PREFERRED_LEADER_NOT_AVAILABLE).
    PreferredNotAvailable,
    /// No replica is unfenced (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    EligibleNotAvailable,
    /// The election's record failed (no controller, a timeout, ...).
    Failed(Error),
}

/// What a reassignment call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Altered {
    /// Started, replaced or cancelled.
    Done,
    /// A cancellation of a partition that is not being reassigned
    /// (NO_REASSIGNMENT_IN_PROGRESS).
    NoReassignmentInProgress,
}

/// A partition being reassigned, as ListPartitionReassignments lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reassignment {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Every replica now: the target, then the original ones being removed.
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas being removed.
    pub removing: Vec<i32>,
}

/// The partition `topic`-`partition` of `image`, or the error naming what is missing.
fn find<'a>(
    image: &'a MetadataImage,
    topic: &str,
    partition: i32,
) -> Result<(PartitionRef, &'a PartitionImage)> {
    let t = image
        .topic(topic)
        .ok_or_else(|| Error::UnknownTopic(topic.to_string()))?;
    let p = usize::try_from(partition)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(|| Error::UnknownPartition {
            topic: topic.to_string(),
            partition,
            count: t.partitions.len() as i32,
        })?;
    let r = PartitionRef {
        topic: topic.to_string(),
        topic_id: t.id,
        partition,
    };
    Ok((r, p))
}

/// Where an election stands for `p`: decided already (Some), or to be proposed (None).
fn election_before(
    image: &MetadataImage,
    election: ElectionType,
    p: &PartitionImage,
) -> Option<ElectionOutcome> {
    match election {
        ElectionType::Preferred if p.replicas.first() == Some(&p.leader) => {
            Some(ElectionOutcome::NotNeeded)
        }
        ElectionType::Preferred if !image.prefers_another_leader(p) => {
            Some(ElectionOutcome::PreferredNotAvailable)
        }
        ElectionType::Unclean if p.leader != NO_LEADER => Some(ElectionOutcome::NotNeeded),
        ElectionType::Unclean if !p.replicas.iter().any(|r| image.is_unfenced(*r)) => {
            Some(ElectionOutcome::EligibleNotAvailable)
        }
        _ => None,
    }
}

/// How an election proposed for `p` ended, from the image after it was applied.
fn election_after(election: ElectionType, p: &PartitionImage) -> ElectionOutcome {
    match election {
        ElectionType::Preferred if p.replicas.first() == Some(&p.leader) => {
            ElectionOutcome::Elected
        }
        ElectionType::Preferred => ElectionOutcome::PreferredNotAvailable,
        ElectionType::Unclean if p.leader != NO_LEADER => ElectionOutcome::Elected,
        ElectionType::Unclean => ElectionOutcome::EligibleNotAvailable,
    }
}

impl ClusterNode {
    /// Every partition of the cluster, by topic name and index (ElectLeaders for all
    /// partitions).
    pub(crate) fn all_partitions(&self) -> Vec<(String, i32)> {
        let image = self.image();
        image
            .topics
            .values()
            .flat_map(|t| (0..t.partitions.len() as i32).map(|i| (t.name.clone(), i)))
            .collect()
    }

    /// Elects leaders of `partitions` through the controller, in one record, and
    /// tells how each ended (an unknown topic or partition is `Err`).
    pub(crate) fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: &[(String, i32)],
        timeout: Duration,
    ) -> Vec<Result<ElectionOutcome>> {
        let image = self.image();
        let mut out: Vec<Result<ElectionOutcome>> = Vec::with_capacity(partitions.len());
        let mut to_elect = Vec::new();
        for (topic, partition) in partitions {
            match find(&image, topic, *partition) {
                Err(e) => out.push(Err(e)),
                Ok((r, p)) => match election_before(&image, election, p) {
                    Some(o) => out.push(Ok(o)),
                    None => {
                        to_elect.push((out.len(), r));
                        // Decided once the record is applied.
                        out.push(Ok(ElectionOutcome::Elected));
                    }
                },
            }
        }
        if to_elect.is_empty() {
            return out;
        }
        let refs: Vec<PartitionRef> = to_elect.iter().map(|(_, r)| r.clone()).collect();
        let record = match election {
            ElectionType::Preferred => MetadataRecord::ElectPreferredLeaders { partitions: refs },
            ElectionType::Unclean => MetadataRecord::ElectUncleanLeaders { partitions: refs },
        };
        let applied = self.propose(record, timeout);
        let image = self.image();
        for (at, r) in to_elect {
            out[at] = match &applied {
                Err(e) => Ok(ElectionOutcome::Failed(e.clone())),
                Ok(_) => match find(&image, &r.topic, r.partition) {
                    Ok((now, p)) if now.topic_id == r.topic_id => Ok(election_after(election, p)),
                    Ok(_) => Err(Error::UnknownTopic(r.topic.clone())),
                    Err(e) => Err(e),
                },
            };
        }
        if let Err(e) = &applied {
            tracing::warn!(node = self.node_id(), error = %e, "leader election failed");
        }
        out
    }

    /// Starts (or replaces) the reassignment of `topic`-`partition` to `target`, or
    /// with None cancels the one in progress, through the controller. Returns once
    /// this node applied it; the new replicas then catch up, and the replica set
    /// switches once they are all in the ISR.
    pub(crate) fn alter_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<Vec<i32>>,
        timeout: Duration,
    ) -> Result<Altered> {
        let image = self.image();
        let (r, p) = find(&image, topic, partition)?;
        if target.is_none() && !p.reassigning() {
            return Ok(Altered::NoReassignmentInProgress);
        }
        self.propose(
            MetadataRecord::AlterPartitionReassignment {
                partition: r,
                target,
            },
            timeout,
        )?;
        Ok(Altered::Done)
    }

    /// The replicas `topic`-`partition` has, counting a reassignment's target only
    /// (for the replication factor check of AlterPartitionReassignments v1).
    pub(crate) fn replication_factor(&self, topic: &str, partition: i32) -> Result<usize> {
        let image = self.image();
        let (_, p) = find(&image, topic, partition)?;
        Ok(p.original_replicas().len())
    }

    /// The reassignments in progress, of `partitions` only when given (unknown ones
    /// and ones not being reassigned are left out, as Kafka does).
    pub(crate) fn list_reassignments(
        &self,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<Reassignment> {
        let image = self.image();
        image
            .reassignments()
            .into_iter()
            .filter(|(t, i, _)| {
                partitions.is_none_or(|ps| ps.iter().any(|(pt, pi)| pt == t && pi == i))
            })
            .map(|(t, i, p)| Reassignment {
                topic: t.to_string(),
                partition: i,
                replicas: p.replicas.clone(),
                adding: p.adding_replicas.clone(),
                removing: p.removing_replicas.clone(),
            })
            .collect()
    }
}
