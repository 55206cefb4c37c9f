//! A history of what Kafka clients saw during a fault schedule, and a checker in the
//! style of Jepsen's Kafka workload that finds the anomalies in it.
//!
//! Producers record each acknowledged record (its partition, value and the offset the
//! acknowledgement gave); consumers record each assignment they were given, each
//! revocation, and each record they polled (partition, offset, value), in the order
//! their poll loop saw them. Values are unique per send, so a value names one record.
//! A final read of every partition from its start (a consumer without a group, or the
//! nodes' logs) is recorded as polls of a reader without a group.
//!
//! The anomalies, after Jepsen's names:
//! - **lost**: an acknowledged record no read found, although a read passed its offset;
//! - **duplicate**: one value at two offsets of a partition;
//! - **inconsistent offset**: one offset read (or acknowledged) with two values;
//! - **misplaced ack**: an acknowledged record read at another offset than its ack gave;
//! - **nonmonotonic poll**: within one assignment a consumer's next offset of a
//!   partition is not above the previous one (it went back);
//! - **skip**: within one assignment a consumer's next offset jumps over an offset that
//!   holds a record (some read or acknowledgement saw one there);
//! - **undelivered**: an acknowledged record a consumer group never delivered to any of
//!   its members.
//!
//! An acknowledgement may carry no offset: librdkafka's idempotent producer reports
//! offset -1001 (`RD_KAFKA_OFFSET_INVALID`) for records it acknowledges implicitly,
//! when a later batch of the same partition succeeded while theirs had failed with an
//! uncertain outcome (a timeout, a lost connection): no broker answered them, so no
//! offset exists to compare. Such a record (any negative offset) counts as
//! acknowledged without offset ([`Report::acked_without_offset`]); it is still lost if
//! no read found it, a duplicate if read at two offsets, and undelivered if a group
//! never delivered it, but it names no offset and so is never a misplaced ack.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// One event of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A producer's record was acknowledged at `offset` of `partition`.
    Acked {
        /// The partition.
        partition: i32,
        /// The record's value (unique per send).
        value: String,
        /// The offset the acknowledgement gave.
        offset: i64,
    },
    /// `consumer` of `group` was given `partitions` (a new assignment of each).
    Assigned {
        /// The consumer's name (unique in the history).
        consumer: String,
        /// Its group.
        group: String,
        /// The partitions given.
        partitions: Vec<i32>,
    },
    /// `consumer` lost `partitions` (its assignment of them ends).
    Revoked {
        /// The consumer's name.
        consumer: String,
        /// The partitions taken away.
        partitions: Vec<i32>,
    },
    /// `consumer` polled the record at `offset` of `partition`. `group` is None for a
    /// reader outside any group (the final read).
    Polled {
        /// The consumer's name.
        consumer: String,
        /// Its group, None for a reader without one.
        group: Option<String>,
        /// The partition.
        partition: i32,
        /// The offset.
        offset: i64,
        /// The record's value.
        value: String,
    },
}

/// One anomaly the checker found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Anomaly {
    /// An acknowledged record no read found, though a read went past its offset.
    Lost {
        /// The partition.
        partition: i32,
        /// The value.
        value: String,
        /// Its acknowledged offset.
        offset: i64,
    },
    /// One value at several offsets of a partition.
    Duplicate {
        /// The partition.
        partition: i32,
        /// The value.
        value: String,
        /// The offsets it was found at.
        offsets: Vec<i64>,
    },
    /// One offset with several values.
    InconsistentOffset {
        /// The partition.
        partition: i32,
        /// The offset.
        offset: i64,
        /// The values seen there.
        values: Vec<String>,
    },
    /// An acknowledged record read at another offset than its acknowledgement gave.
    MisplacedAck {
        /// The partition.
        partition: i32,
        /// The value.
        value: String,
        /// The acknowledged offset.
        acked: i64,
        /// Where a read found it.
        read: i64,
    },
    /// Within one assignment, an offset not above the previous one.
    NonmonotonicPoll {
        /// The consumer.
        consumer: String,
        /// The partition.
        partition: i32,
        /// The previous offset.
        previous: i64,
        /// The next one.
        next: i64,
    },
    /// Within one assignment, a jump over offsets that hold records.
    Skip {
        /// The consumer.
        consumer: String,
        /// The partition.
        partition: i32,
        /// The previous offset.
        previous: i64,
        /// The next one.
        next: i64,
        /// The offsets skipped that hold records.
        skipped: Vec<i64>,
    },
    /// An acknowledged record a group never delivered.
    Undelivered {
        /// The group.
        group: String,
        /// The partition.
        partition: i32,
        /// The value.
        value: String,
        /// Its acknowledged offset.
        offset: i64,
    },
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::Lost {
                partition,
                value,
                offset,
            } => write!(
                f,
                "lost: acknowledged {value:?} at partition {partition} offset {offset} is in no read"
            ),
            Anomaly::Duplicate {
                partition,
                value,
                offsets,
            } => write!(
                f,
                "duplicate: {value:?} at offsets {offsets:?} of partition {partition}"
            ),
            Anomaly::InconsistentOffset {
                partition,
                offset,
                values,
            } => write!(
                f,
                "inconsistent offset: partition {partition} offset {offset} seen with {values:?}"
            ),
            Anomaly::MisplacedAck {
                partition,
                value,
                acked,
                read,
            } => write!(
                f,
                "misplaced ack: {value:?} acknowledged at partition {partition} offset {acked}, read at {read}"
            ),
            Anomaly::NonmonotonicPoll {
                consumer,
                partition,
                previous,
                next,
            } => write!(
                f,
                "nonmonotonic poll: {consumer} read partition {partition} offset {next} after {previous} in one assignment"
            ),
            Anomaly::Skip {
                consumer,
                partition,
                previous,
                next,
                skipped,
            } => write!(
                f,
                "skip: {consumer} read partition {partition} offset {next} after {previous} in one assignment, skipping records at {skipped:?}"
            ),
            Anomaly::Undelivered {
                group,
                partition,
                value,
                offset,
            } => write!(
                f,
                "undelivered: group {group} never delivered {value:?} (partition {partition} offset {offset})"
            ),
        }
    }
}

/// The checker's findings: every anomaly, and counts for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every anomaly found, sorted.
    pub anomalies: Vec<Anomaly>,
    /// Records acknowledged.
    pub acked: usize,
    /// Of those, the ones acknowledged without an offset (librdkafka's -1001).
    pub acked_without_offset: usize,
    /// Records polled by group members.
    pub polled: usize,
    /// Distinct (partition, offset) pairs seen.
    pub offsets: usize,
}

impl Report {
    /// How many anomalies of each kind (by the kind's name), every kind listed.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out: BTreeMap<&'static str, usize> = [
            "lost",
            "duplicate",
            "inconsistent offset",
            "misplaced ack",
            "nonmonotonic poll",
            "skip",
            "undelivered",
        ]
        .into_iter()
        .map(|k| (k, 0))
        .collect();
        for a in &self.anomalies {
            *out.entry(kind(a)).or_default() += 1;
        }
        out
    }
}

fn kind(a: &Anomaly) -> &'static str {
    match a {
        Anomaly::Lost { .. } => "lost",
        Anomaly::Duplicate { .. } => "duplicate",
        Anomaly::InconsistentOffset { .. } => "inconsistent offset",
        Anomaly::MisplacedAck { .. } => "misplaced ack",
        Anomaly::NonmonotonicPoll { .. } => "nonmonotonic poll",
        Anomaly::Skip { .. } => "skip",
        Anomaly::Undelivered { .. } => "undelivered",
    }
}

/// What every read and acknowledgement says about one partition.
#[derive(Default)]
struct PartitionFacts {
    /// offset -> values seen there.
    at: BTreeMap<i64, BTreeSet<String>>,
    /// value -> offsets it was read at.
    read_at: HashMap<String, BTreeSet<i64>>,
    /// Highest offset any read reached.
    max_read: Option<i64>,
}

/// Checks `history` for every anomaly the module lists.
pub fn check(history: &[Event]) -> Report {
    let mut facts: BTreeMap<i32, PartitionFacts> = BTreeMap::new();
    let mut acked: Vec<(i32, &str, i64)> = Vec::new();
    let mut report = Report::default();
    for e in history {
        match e {
            Event::Acked {
                partition,
                value,
                offset,
            } => {
                acked.push((*partition, value, *offset));
                let f = facts.entry(*partition).or_default();
                if *offset < 0 {
                    // Acknowledged without an offset: nothing to place.
                    report.acked_without_offset += 1;
                } else {
                    f.at.entry(*offset).or_default().insert(value.clone());
                }
            }
            Event::Polled {
                partition,
                offset,
                value,
                group,
                ..
            } => {
                if group.is_some() {
                    report.polled += 1;
                }
                let f = facts.entry(*partition).or_default();
                f.at.entry(*offset).or_default().insert(value.clone());
                f.read_at.entry(value.clone()).or_default().insert(*offset);
                f.max_read = f.max_read.max(Some(*offset));
            }
            Event::Assigned { .. } | Event::Revoked { .. } => {}
        }
    }
    report.acked = acked.len();
    report.offsets = facts.values().map(|f| f.at.len()).sum();
    let a = &mut report.anomalies;
    for (p, f) in &facts {
        for (offset, values) in &f.at {
            if values.len() > 1 {
                a.push(Anomaly::InconsistentOffset {
                    partition: *p,
                    offset: *offset,
                    values: values.iter().cloned().collect(),
                });
            }
        }
        for (value, offsets) in &f.read_at {
            if offsets.len() > 1 {
                a.push(Anomaly::Duplicate {
                    partition: *p,
                    value: value.clone(),
                    offsets: offsets.iter().copied().collect(),
                });
            }
        }
    }
    for (p, value, offset) in &acked {
        let f = &facts[p];
        match f.read_at.get(*value) {
            Some(reads) => {
                for read in reads.iter().filter(|r| *offset >= 0 && **r != *offset) {
                    a.push(Anomaly::MisplacedAck {
                        partition: *p,
                        value: value.to_string(),
                        acked: *offset,
                        read: *read,
                    });
                }
            }
            None if f.max_read.is_some_and(|m| m >= *offset) => a.push(Anomaly::Lost {
                partition: *p,
                value: value.to_string(),
                offset: *offset,
            }),
            None => {}
        }
    }
    check_consumers(history, &facts, a);
    check_delivery(history, &acked, a);
    a.sort();
    a.dedup();
    report
}

/// Nonmonotonic polls and skips within each consumer's assignments.
fn check_consumers(history: &[Event], facts: &BTreeMap<i32, PartitionFacts>, a: &mut Vec<Anomaly>) {
    // (consumer, partition) -> last offset polled in the current assignment; an entry
    // exists while the partition is assigned (None: nothing polled yet).
    let mut last: HashMap<(&str, i32), Option<i64>> = HashMap::new();
    for e in history {
        match e {
            Event::Assigned {
                consumer,
                partitions,
                ..
            } => {
                for p in partitions {
                    last.insert((consumer, *p), None);
                }
            }
            Event::Revoked {
                consumer,
                partitions,
            } => {
                for p in partitions {
                    last.remove(&(consumer.as_str(), *p));
                }
            }
            Event::Polled {
                consumer,
                group: Some(_),
                partition,
                offset,
                ..
            } => {
                let key = (consumer.as_str(), *partition);
                let previous = last.get(&key).copied().flatten();
                if let Some(previous) = previous {
                    if *offset <= previous {
                        a.push(Anomaly::NonmonotonicPoll {
                            consumer: consumer.clone(),
                            partition: *partition,
                            previous,
                            next: *offset,
                        });
                    } else if *offset > previous + 1 {
                        let skipped: Vec<i64> = facts[partition]
                            .at
                            .range(previous + 1..*offset)
                            .map(|(o, _)| *o)
                            .collect();
                        if !skipped.is_empty() {
                            a.push(Anomaly::Skip {
                                consumer: consumer.clone(),
                                partition: *partition,
                                previous,
                                next: *offset,
                                skipped,
                            });
                        }
                    }
                }
                // A poll outside an assignment starts tracking too (the callback may
                // be missing), so later polls are still compared.
                last.insert(key, Some(*offset));
            }
            Event::Polled { .. } | Event::Acked { .. } => {}
        }
    }
}

/// Acknowledged records a group never delivered to any member.
fn check_delivery(history: &[Event], acked: &[(i32, &str, i64)], a: &mut Vec<Anomaly>) {
    let mut delivered: BTreeMap<&str, BTreeSet<(i32, &str)>> = BTreeMap::new();
    for e in history {
        match e {
            Event::Assigned { group, .. } => {
                delivered.entry(group).or_default();
            }
            Event::Polled {
                group: Some(group),
                partition,
                value,
                ..
            } => {
                delivered
                    .entry(group)
                    .or_default()
                    .insert((*partition, value));
            }
            _ => {}
        }
    }
    for (group, seen) in &delivered {
        for (p, value, offset) in acked {
            if !seen.contains(&(*p, *value)) {
                a.push(Anomaly::Undelivered {
                    group: group.to_string(),
                    partition: *p,
                    value: value.to_string(),
                    offset: *offset,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(p: i32, v: &str, o: i64) -> Event {
        Event::Acked {
            partition: p,
            value: v.into(),
            offset: o,
        }
    }

    fn assign(c: &str, ps: &[i32]) -> Event {
        Event::Assigned {
            consumer: c.into(),
            group: "g".into(),
            partitions: ps.to_vec(),
        }
    }

    fn revoke(c: &str, ps: &[i32]) -> Event {
        Event::Revoked {
            consumer: c.into(),
            partitions: ps.to_vec(),
        }
    }

    fn poll(c: &str, p: i32, o: i64, v: &str) -> Event {
        Event::Polled {
            consumer: c.into(),
            group: Some("g".into()),
            partition: p,
            offset: o,
            value: v.into(),
        }
    }

    fn read(p: i32, o: i64, v: &str) -> Event {
        Event::Polled {
            consumer: "final".into(),
            group: None,
            partition: p,
            offset: o,
            value: v.into(),
        }
    }

    /// Three records acknowledged at 0..3 of partition 0, delivered to the group in one
    /// assignment and found by the final read.
    fn clean() -> Vec<Event> {
        vec![
            assign("c1", &[0]),
            ack(0, "a", 0),
            ack(0, "b", 1),
            ack(0, "c", 2),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 1, "b"),
            poll("c1", 0, 2, "c"),
            read(0, 0, "a"),
            read(0, 1, "b"),
            read(0, 2, "c"),
        ]
    }

    #[test]
    fn a_clean_history_has_no_anomaly() {
        let r = check(&clean());
        assert_eq!(r.anomalies, vec![]);
        assert_eq!((r.acked, r.polled, r.offsets), (3, 3, 3));
        assert!(r.counts().values().all(|n| *n == 0));
        assert_eq!(r.counts().len(), 7);
    }

    #[test]
    fn redelivery_after_a_new_assignment_is_not_an_anomaly() {
        let mut h = clean();
        h.extend([
            revoke("c1", &[0]),
            assign("c2", &[0]),
            poll("c2", 0, 1, "b"),
            poll("c2", 0, 2, "c"),
        ]);
        assert_eq!(check(&h).anomalies, vec![]);
    }

    #[test]
    fn a_lost_acknowledged_record_is_found() {
        // "b" acknowledged at 1; the final read and the group went past 1 without it.
        let h = vec![
            assign("c1", &[0]),
            ack(0, "a", 0),
            ack(0, "b", 1),
            ack(0, "c", 2),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 2, "c"),
            read(0, 0, "a"),
            read(0, 2, "c"),
        ];
        let r = check(&h);
        assert!(r.anomalies.contains(&Anomaly::Lost {
            partition: 0,
            value: "b".into(),
            offset: 1
        }));
        assert_eq!(r.counts()["lost"], 1);
        assert_eq!(r.counts()["undelivered"], 1);
    }

    #[test]
    fn an_acknowledged_record_beyond_every_read_is_not_called_lost() {
        let h = vec![ack(0, "a", 0), ack(0, "b", 1), read(0, 0, "a")];
        assert_eq!(check(&h).anomalies, vec![]);
    }

    #[test]
    fn a_duplicate_is_found() {
        let mut h = clean();
        h.push(read(0, 3, "b"));
        let r = check(&h);
        assert!(r.anomalies.contains(&Anomaly::Duplicate {
            partition: 0,
            value: "b".into(),
            offsets: vec![1, 3],
        }));
        assert_eq!(r.counts()["duplicate"], 1);
    }

    #[test]
    fn an_offset_with_two_values_is_found() {
        let mut h = clean();
        h.push(Event::Polled {
            consumer: "c9".into(),
            group: Some("g2".into()),
            partition: 0,
            offset: 2,
            value: "x".into(),
        });
        let r = check(&h);
        assert!(r.anomalies.contains(&Anomaly::InconsistentOffset {
            partition: 0,
            offset: 2,
            values: vec!["c".into(), "x".into()],
        }));
        assert_eq!(r.counts()["inconsistent offset"], 1);
    }

    #[test]
    fn an_acknowledgement_at_another_offset_is_found() {
        // "c" acknowledged at 5 but read at 2 (and 5 was never read).
        let h = vec![
            assign("c1", &[0]),
            ack(0, "a", 0),
            ack(0, "b", 1),
            ack(0, "c", 5),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 1, "b"),
            poll("c1", 0, 2, "c"),
        ];
        let r = check(&h);
        assert_eq!(
            r.anomalies,
            vec![Anomaly::MisplacedAck {
                partition: 0,
                value: "c".into(),
                acked: 5,
                read: 2,
            }]
        );
    }

    /// librdkafka's `RD_KAFKA_OFFSET_INVALID`: the offset of an implicit acknowledgement.
    const UNKNOWN: i64 = -1001;

    #[test]
    fn an_acknowledgement_without_offset_found_once_is_no_anomaly() {
        // "b" and "c" acknowledged implicitly (offset unknown), each read once.
        let h = vec![
            assign("c1", &[0]),
            ack(0, "a", 0),
            ack(0, "b", UNKNOWN),
            ack(0, "c", UNKNOWN),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 1, "b"),
            poll("c1", 0, 2, "c"),
            read(0, 0, "a"),
            read(0, 1, "b"),
            read(0, 2, "c"),
        ];
        let r = check(&h);
        assert_eq!(r.anomalies, vec![]);
        assert_eq!(
            (r.acked, r.acked_without_offset, r.offsets),
            (3, 2, 3),
            "the unknown offset is not counted as an offset"
        );
    }

    #[test]
    fn an_acknowledgement_without_offset_is_still_checked_for_loss_and_duplicates() {
        let h = vec![
            assign("c1", &[0]),
            ack(0, "a", 0),
            ack(0, "b", UNKNOWN),
            ack(0, "c", UNKNOWN),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 1, "c"),
            read(0, 0, "a"),
            read(0, 1, "c"),
            read(0, 2, "c"),
        ];
        let r = check(&h);
        assert_eq!(
            r.anomalies,
            vec![
                Anomaly::Lost {
                    partition: 0,
                    value: "b".into(),
                    offset: UNKNOWN,
                },
                Anomaly::Duplicate {
                    partition: 0,
                    value: "c".into(),
                    offsets: vec![1, 2],
                },
                Anomaly::Undelivered {
                    group: "g".into(),
                    partition: 0,
                    value: "b".into(),
                    offset: UNKNOWN,
                },
            ]
        );
        assert_eq!(r.counts()["misplaced ack"], 0);
    }

    #[test]
    fn a_consumer_going_back_within_one_assignment_is_found() {
        // What auto.offset.reset=earliest does after an out-of-range fetch.
        let mut h = clean();
        h.push(poll("c1", 0, 0, "a"));
        let r = check(&h);
        assert_eq!(
            r.anomalies,
            vec![Anomaly::NonmonotonicPoll {
                consumer: "c1".into(),
                partition: 0,
                previous: 2,
                next: 0,
            }]
        );
        assert_eq!(r.counts()["nonmonotonic poll"], 1);
    }

    #[test]
    fn a_consumer_skipping_records_within_one_assignment_is_found() {
        // What auto.offset.reset=latest does after an out-of-range fetch: 1..3 were
        // written (the final read saw them), the consumer jumped from 0 to 4.
        let h = vec![
            assign("c1", &[0]),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 4, "e"),
            read(0, 0, "a"),
            read(0, 1, "b"),
            read(0, 2, "c"),
            read(0, 3, "d"),
            read(0, 4, "e"),
        ];
        let r = check(&h);
        assert_eq!(
            r.anomalies,
            vec![Anomaly::Skip {
                consumer: "c1".into(),
                partition: 0,
                previous: 0,
                next: 4,
                skipped: vec![1, 2, 3],
            }]
        );
    }

    #[test]
    fn a_gap_with_no_record_in_it_is_not_a_skip() {
        // Offsets 1 and 2 hold nothing anyone saw (control records, say).
        let h = vec![
            assign("c1", &[0]),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 3, "d"),
            read(0, 0, "a"),
            read(0, 3, "d"),
        ];
        assert_eq!(check(&h).anomalies, vec![]);
    }

    #[test]
    fn a_record_the_group_never_delivered_is_found() {
        // The group got "a" and "b"; "c" was acknowledged and read by the final read
        // only. A second group that got everything has no anomaly.
        let mut h = vec![
            assign("c1", &[0]),
            ack(0, "a", 0),
            ack(0, "b", 1),
            ack(0, "c", 2),
            poll("c1", 0, 0, "a"),
            poll("c1", 0, 1, "b"),
            read(0, 0, "a"),
            read(0, 1, "b"),
            read(0, 2, "c"),
        ];
        for (o, v) in ["a", "b", "c"].into_iter().enumerate() {
            h.push(Event::Polled {
                consumer: "d1".into(),
                group: Some("g2".into()),
                partition: 0,
                offset: o as i64,
                value: v.into(),
            });
        }
        let r = check(&h);
        assert_eq!(
            r.anomalies,
            vec![Anomaly::Undelivered {
                group: "g".into(),
                partition: 0,
                value: "c".into(),
                offset: 2,
            }]
        );
        assert!(
            r.anomalies[0]
                .to_string()
                .starts_with("undelivered: group g")
        );
    }
}
