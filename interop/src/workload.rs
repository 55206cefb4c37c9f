//! The clients of a fault schedule, recording a [`history`](crate::history): an
//! idempotent acks=all producer of numbered records (librdkafka), consumer group members
//! (librdkafka, `auto.offset.reset` earliest or latest) whose rebalances and polls are
//! recorded, and a final read of every partition from its start.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};

use crate::history::Event;
use crate::numbered::Deliveries;

/// The history, shared by the clients' threads (each appends in its own order).
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Vec<Event>>>);

impl History {
    /// Appends `e`.
    pub fn push(&self, e: Event) {
        self.0.lock().unwrap().push(e);
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

/// A group member's context: records its rebalances.
struct Member {
    name: String,
    group: String,
    history: History,
}

impl ClientContext for Member {}

fn partitions(list: &TopicPartitionList) -> Vec<i32> {
    list.elements().iter().map(|e| e.partition()).collect()
}

impl ConsumerContext for Member {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            self.history.push(Event::Revoked {
                consumer: self.name.clone(),
                partitions: partitions(list),
            });
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(list) = rebalance {
            self.history.push(Event::Assigned {
                consumer: self.name.clone(),
                group: self.group.clone(),
                partitions: partitions(list),
            });
        }
    }
}

/// A consumer's settings for a cluster whose nodes come and go: short socket and
/// metadata timeouts so it moves to new leaders quickly.
fn consumer_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "10000")
        .set("topic.metadata.refresh.interval.ms", "2000")
        .set("fetch.wait.max.ms", "200")
        .set("enable.partition.eof", "false");
    c
}

/// Starts member `name` of `group` on `topic`, with `auto.offset.reset` = `reset`,
/// polling and recording until `stop` (or 2 hours).
pub fn member(
    bootstrap: &str,
    topic: &str,
    group: &str,
    reset: &str,
    name: &str,
    history: &History,
    stop: &Arc<AtomicBool>,
) -> JoinHandle<()> {
    let context = Member {
        name: name.to_string(),
        group: group.to_string(),
        history: history.clone(),
    };
    let consumer: BaseConsumer<Member> = consumer_config(bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", reset)
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "1000")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .create_with_context(context)
        .expect("an rdkafka consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let (history, stop, name, group) = (
        history.clone(),
        stop.clone(),
        name.to_string(),
        group.to_string(),
    );
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(2 * 3600);
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            history.push(Event::Polled {
                consumer: name.clone(),
                group: Some(group.clone()),
                partition: m.partition(),
                offset: m.offset(),
                value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
            });
        }
        // librdkafka's close (leaving the group, run when the consumer is dropped) can
        // wait without end; the history is complete once polling stopped, so the close
        // finishes on its own thread, not waited for.
        std::thread::spawn(move || {
            consumer.unsubscribe();
            drop(consumer);
        });
    })
}

/// Sends `partition:n` records to each of `partitions` of `topic` in turn, about
/// `per_second` in all, with at most 2000 unacknowledged, until `stop` (or 2 hours);
/// then flushes for up to `flush`. Returns the number sent and whether the flush
/// completed.
pub fn produce(
    producer: &rdkafka::producer::BaseProducer<Deliveries>,
    topic: &str,
    partitions: i32,
    per_second: u64,
    stop: &AtomicBool,
    flush: Duration,
) -> (u64, bool) {
    let d = producer.context().clone();
    let mut next = vec![0u64; partitions as usize];
    let mut sent = 0u64;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(2 * 3600);
    while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
        let done = d.acked_count() + d.failed.load(Ordering::Relaxed);
        let due = start.elapsed().as_millis() as u64 * per_second / 1000;
        if sent >= due || sent >= done + 2000 {
            producer.poll(Duration::from_millis(5));
            continue;
        }
        let p = (sent % partitions as u64) as i32;
        let value = format!("{p}:{}", next[p as usize]);
        if producer
            .send(
                BaseRecord::<(), String>::to(topic)
                    .payload(&value)
                    .partition(p),
            )
            .is_ok()
        {
            next[p as usize] += 1;
            sent += 1;
        }
        producer.poll(Duration::ZERO);
    }
    (sent, producer.flush(flush).is_ok())
}

/// A numbered-records producer of [`produce`] on its own thread.
pub struct Background {
    /// What librdkafka reported so far.
    pub deliveries: Deliveries,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, bool)>,
}

impl Background {
    /// Stops sending and waits for the flush: the number sent and whether the flush
    /// completed.
    pub fn stop(self) -> (u64, bool) {
        self.stop.store(true, Ordering::Release);
        self.thread.join().expect("the producer's thread")
    }
}

/// Starts an idempotent acks=all producer of `bootstrap`
/// ([`numbered::producer`](crate::numbered::producer), giving up on a record after
/// `timeout`) sending to `partitions` of `topic` as [`produce`] does, about `per_second`
/// in all, on its own thread until [`Background::stop`]; the flush then waits up to
/// `timeout`.
pub fn produce_in_background(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    per_second: u64,
    timeout: Duration,
) -> Background {
    let producer = crate::numbered::producer(bootstrap, timeout);
    let deliveries = Deliveries::clone(producer.context());
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (stop, topic) = (stop.clone(), topic.to_string());
        std::thread::spawn(move || {
            let done = produce(&producer, &topic, partitions, per_second, &stop, timeout);
            // The flush is bounded; librdkafka's close (the drop) is not waited for.
            std::thread::spawn(move || drop(producer));
            done
        })
    };
    Background {
        deliveries,
        stop,
        thread,
    }
}

/// The acknowledgements `d` received, as history events.
pub fn acked_events(d: &Deliveries) -> Vec<Event> {
    let mut out = Vec::new();
    for (p, acks) in d.snapshot() {
        for (seq, ack) in acks {
            out.push(Event::Acked {
                partition: p,
                value: format!("{p}:{seq}"),
                offset: ack.offset,
            });
        }
    }
    out
}

/// Values `group` polled so far, per partition.
pub fn delivered(events: &[Event], group: &str) -> std::collections::HashSet<(i32, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Polled {
                group: Some(g),
                partition,
                value,
                ..
            } if g == group => Some((*partition, value.clone())),
            _ => None,
        })
        .collect()
}

/// Reads every partition of `topic` from its start to its high watermark (as it was
/// when the read began) with a consumer outside any group, as polls of `name`; gives up
/// after `limit`. Returns the events and whether every partition was read to its end.
pub fn read_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    name: &str,
    limit: Duration,
) -> (Vec<Event>, bool) {
    let consumer: BaseConsumer = consumer_config(bootstrap)
        .set("group.id", format!("{name}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("an rdkafka consumer");
    let mut ends = Vec::new();
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        let (_, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(30))
            .expect("the partition's watermarks");
        ends.push(high);
        list.add_partition_offset(topic, p, Offset::Beginning)
            .expect("a partition to read");
    }
    consumer.assign(&list).expect("assign every partition");
    let mut next = vec![0i64; partitions as usize];
    let mut out = Vec::new();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && (0..partitions as usize).any(|p| next[p] < ends[p]) {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        next[m.partition() as usize] = m.offset() + 1;
        out.push(Event::Polled {
            consumer: name.to_string(),
            group: None,
            partition: m.partition(),
            offset: m.offset(),
            value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
        });
    }
    let complete = (0..partitions as usize).all(|p| next[p] >= ends[p]);
    // As a member's: librdkafka's close is not waited for.
    std::thread::spawn(move || drop(consumer));
    (out, complete)
}

/// Starts member `name` of `group` on `topic` through tidelog's own network group
/// member (`tidelog::GroupConsumer` on a `tidelog::Cluster`, what `tidelog consume
/// --group --bootstrap` runs), with `auto.offset.reset` = `reset` (`earliest` or
/// `latest`), committing its positions every second, polling and
/// recording until `stop` (or 2 hours). A change of generation or partitions after a
/// poll is recorded as the end of the old assignment and the start of the new one,
/// before that poll's records (a member fetches under the assignment it just joined).
pub fn tidelog_member(
    bootstrap: &str,
    topic: &str,
    group: &str,
    reset: &str,
    name: &str,
    history: &History,
    stop: &Arc<AtomicBool>,
) -> JoinHandle<()> {
    let reset = match reset {
        "earliest" => tidelog::OffsetReset::Earliest,
        _ => tidelog::OffsetReset::Latest,
    };
    let config = tidelog::GroupConfig::new(group, &[topic]).auto_offset_reset(reset);
    let (bootstrap, history, stop, name, group) = (
        bootstrap.to_string(),
        history.clone(),
        stop.clone(),
        name.to_string(),
        group.to_string(),
    );
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(2 * 3600);
        let mut member = None;
        while member.is_none() && !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let joined = tidelog::Cluster::connect(tidelog::ClientConfig::new(bootstrap.as_str()))
                .and_then(|cluster| tidelog::GroupConsumer::join(&cluster, config.clone()));
            match joined {
                Ok(m) => member = Some(m),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
        let Some(mut member) = member else { return };
        let mut current: Option<(i32, Vec<i32>)> = None;
        let mut committed = Instant::now();
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let records = member.poll(Duration::from_millis(200));
            let mut now: Vec<i32> = member.assignment().into_iter().map(|(_, p)| p).collect();
            now.sort_unstable();
            let now = (member.generation(), now);
            if current.as_ref() != Some(&now) {
                if let Some((_, old)) = current.take() {
                    history.push(Event::Revoked {
                        consumer: name.clone(),
                        partitions: old,
                    });
                }
                history.push(Event::Assigned {
                    consumer: name.clone(),
                    group: group.clone(),
                    partitions: now.1.clone(),
                });
                current = Some(now);
            }
            let Ok(records) = records else {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            };
            for r in records.iter().flatten() {
                history.push(Event::Polled {
                    consumer: name.clone(),
                    group: Some(group.clone()),
                    partition: r.partition,
                    offset: r.offset,
                    value: String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned(),
                });
            }
            if committed.elapsed() >= Duration::from_secs(1) {
                let _ = member.commit_sync();
                committed = Instant::now();
            }
        }
        member.close();
    })
}
