//! Where the admin client's requests go, and what it does when one fails: it bootstraps
//! from a list of addresses (trying each), learns the brokers and the controller from
//! Metadata, finds group coordinators with FindCoordinator, keeps one connection per
//! address, and repeats a request a bounded number of times for the items a broker
//! answered with a retriable error (the leader, controller or coordinator moved) or when
//! a broker could not be reached.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::ops::RangeInclusive;
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};

use super::{AdminError, ErrorCode, Resource};
use crate::client::Client;
use crate::error::{Error, Result};

/// Metadata version asked (every tidelog node and Kafka from 2.1 answer it).
const METADATA_VERSION: i16 = 8;
/// FindCoordinator version asked (one key per request).
const FIND_COORDINATOR_VERSION: i16 = 2;
/// How much longer than a request's own timeout the client waits for its answer, so
/// that a broker's REQUEST_TIMED_OUT arrives before the socket gives up.
const SLACK: Duration = Duration::from_secs(2);
/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How the client identifies itself, waits and retries.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub client_id: String,
    pub request_timeout: Duration,
    pub retries: u32,
    pub retry_backoff: Duration,
    /// TLS and SASL of every connection.
    pub security: std::sync::Arc<crate::client::ClientSecurity>,
    /// Each connection asks the broker's API versions (ApiVersions), and the requests
    /// that can ([`Router::call_controller_negotiated`]) go in the highest version both
    /// sides speak; otherwise every request goes in its fixed version.
    pub negotiate: bool,
}

/// What one attempt made of one item (a topic, partition or group).
pub(super) enum Outcome<T> {
    /// Final: the value, or an error that asking again would not change.
    Done(Result<T>),
    /// Ask again (after fresh metadata), unless the attempts are used up: then this is
    /// the item's error.
    Retry(Error),
}

impl<T> From<std::result::Result<T, AdminError>> for Outcome<T> {
    fn from(r: std::result::Result<T, AdminError>) -> Outcome<T> {
        match r {
            Ok(v) => Outcome::Done(Ok(v)),
            Err(e) if e.code.is_retriable() => Outcome::Retry(e.into()),
            Err(e) => Outcome::Done(Err(e.into())),
        }
    }
}

/// `Ok` for error code 0, else the refusal of `resource` with the broker's message.
pub(super) fn check(
    resource: impl FnOnce() -> Resource,
    code: i16,
    message: Option<&StrBytes>,
) -> std::result::Result<(), AdminError> {
    if code == 0 {
        return Ok(());
    }
    Err(AdminError::new(
        resource(),
        ErrorCode::from_code(code),
        message.map(|m| m.to_string()),
    ))
}

/// A Kafka string.
pub(super) fn kstr(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// True for a failure to reach a broker (as opposed to a broker's answer).
fn unreachable(e: &Error) -> bool {
    matches!(e, Error::Io { .. } | Error::Timeout(_))
}

/// True for a failure before anything was sent (the connection could not be made), so
/// that a request which is not safe to repeat can still go elsewhere.
fn not_sent(e: &Error) -> bool {
    matches!(e, Error::Io { op, .. } if matches!(*op, "connect to" | "resolve" | "reach any of"))
}

/// `host:port`, with an IPv6 host in brackets.
fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Connections, the cluster's brokers as last seen, and the retry loop.
#[derive(Debug)]
pub(super) struct Router {
    bootstrap: Vec<String>,
    settings: Settings,
    /// One connection per address (bootstrap addresses and brokers share them).
    conns: HashMap<String, Client>,
    /// Node id to `host:port`, from the last Metadata answer.
    nodes: BTreeMap<i32, String>,
    /// The controller's node id, from the last Metadata answer.
    controller: Option<i32>,
    /// The address that answered last: asked first for requests any broker answers.
    last_good: Option<String>,
}

impl Router {
    /// A router over `bootstrap` (`host:port` entries, checked by the caller).
    pub(super) fn new(bootstrap: Vec<String>, settings: Settings) -> Router {
        Router {
            bootstrap,
            settings,
            conns: HashMap::new(),
            nodes: BTreeMap::new(),
            controller: None,
            last_good: None,
        }
    }

    /// The request timeout in ms, for requests that carry one.
    pub(super) fn timeout_ms(&self) -> i32 {
        self.settings
            .request_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32
    }

    /// Sends `request` to the broker at `addr`.
    pub(super) fn call_addr<R: Request>(
        &mut self,
        addr: &str,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        let timeout = self.settings.request_timeout + SLACK;
        self.call_addr_within(addr, request, version, timeout)
    }

    /// Sends `request` to the broker at `addr`, waiting at most `timeout` for its answer
    /// (a JoinGroup waits for the whole rebalance).
    pub(super) fn call_addr_within<R: Request>(
        &mut self,
        addr: &str,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let result = self.client(addr).call(request, version, timeout);
        self.answered(addr, &result);
        result
    }

    /// The connection to `addr` (made on first use).
    fn client(&mut self, addr: &str) -> &mut Client {
        let settings = &self.settings;
        self.conns.entry(addr.to_string()).or_insert_with(|| {
            let client = Client::new(addr, settings.client_id.clone())
                .with_security(settings.security.clone());
            if settings.negotiate {
                client.negotiating()
            } else {
                client
            }
        })
    }

    /// Remembers whether `addr` answered.
    fn answered<T>(&mut self, addr: &str, result: &Result<T>) {
        match result {
            Ok(_) => self.last_good = Some(addr.to_string()),
            Err(_) if self.last_good.as_deref() == Some(addr) => self.last_good = None,
            Err(_) => {}
        }
    }

    /// Sends `request` (one any broker answers, safe to repeat) to the broker that
    /// answered last, else to each known broker and bootstrap address in turn until one
    /// answers.
    pub(super) fn call_any<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        let mut candidates: Vec<String> = Vec::new();
        for a in self
            .last_good
            .iter()
            .chain(self.nodes.values())
            .chain(self.bootstrap.iter())
        {
            if !candidates.contains(a) {
                candidates.push(a.clone());
            }
        }
        let mut last = None;
        for addr in &candidates {
            match self.call_addr(addr, request, version) {
                Ok(r) => return Ok(r),
                Err(e) if unreachable(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(match last {
            Some(Error::Io { source, .. }) if candidates.len() > 1 => Error::Io {
                op: "reach any of",
                path: candidates.join(",").into(),
                source,
            },
            Some(e) => e,
            None => Error::InvalidConfig {
                key: "bootstrap.servers".into(),
                reason: "no broker address to connect to".into(),
            },
        })
    }

    /// Asks any broker for the metadata of `topics` (`None`: every topic; an empty
    /// list: brokers and controller only), and remembers the brokers and the
    /// controller. Never creates a topic.
    pub(super) fn refresh(&mut self, topics: Option<&[String]>) -> Result<MetadataResponse> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(kstr(n)))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let response = self.call_any(&request, METADATA_VERSION)?;
        self.nodes = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, host_port(&b.host, b.port)))
            .collect();
        self.controller = Some(response.controller_id.0).filter(|id| *id >= 0);
        Ok(response)
    }

    /// The node ids of the brokers, as the last Metadata answer gave them.
    pub(super) fn node_ids(&self) -> Vec<i32> {
        self.nodes.keys().copied().collect()
    }

    /// The address of node `id`, as the last Metadata answer gave it.
    pub(super) fn node_addr(&self, id: i32) -> Option<String> {
        self.nodes.get(&id).cloned()
    }

    /// Where requests for the controller go: the controller if the last Metadata named
    /// one this client can reach, else the broker that answered last (a tidelog node
    /// hands such requests to its controller itself; a Kafka broker that is not the
    /// controller answers NOT_CONTROLLER, and the client asks again).
    pub(super) fn controller_addr(&self) -> Result<String> {
        self.controller
            .and_then(|id| self.node_addr(id))
            .or_else(|| self.last_good.clone())
            .or_else(|| self.bootstrap.first().cloned())
            .ok_or_else(|| Error::InvalidConfig {
                key: "bootstrap.servers".into(),
                reason: "no broker address to connect to".into(),
            })
    }

    /// Sends `request` to the controller, as fresh metadata names it (see
    /// [`controller_addr`](Router::controller_addr)).
    pub(super) fn call_controller<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        self.refresh(Some(&[]))?;
        let addr = self.controller_addr()?;
        self.call_addr(&addr, request, version)
    }

    /// Sends the request `build` makes to the controller, as fresh metadata names it:
    /// on a router that negotiates, in the highest version of `ours` the controller
    /// answers, else in `fixed`.
    ///
    /// # Errors
    /// [`Error::UnsupportedApi`] naming the controller when it speaks no version of
    /// `ours`; those of [`call_addr`](Router::call_addr).
    pub(super) fn call_controller_negotiated<R: Request + Message>(
        &mut self,
        fixed: i16,
        ours: RangeInclusive<i16>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        self.refresh(Some(&[]))?;
        let addr = self.controller_addr()?;
        let version = if self.settings.negotiate {
            let version = self.client(&addr).version::<R>(ours);
            self.answered(&addr, &version);
            version?
        } else {
            fixed
        };
        self.call_addr(&addr, &build(version), version)
    }

    /// Where requests any broker answers go: the broker that answered last.
    pub(super) fn any_addr(&self) -> Result<String> {
        self.last_good
            .clone()
            .or_else(|| self.nodes.values().next().cloned())
            .or_else(|| self.bootstrap.first().cloned())
            .ok_or_else(|| Error::InvalidConfig {
                key: "bootstrap.servers".into(),
                reason: "no broker address to connect to".into(),
            })
    }

    /// The coordinator of `group`, as `(node id, host:port)` (FindCoordinator).
    pub(super) fn coordinator(&mut self, group: &str) -> Result<Outcome<(i32, String)>> {
        let request = FindCoordinatorRequest::default()
            .with_key(kstr(group))
            .with_key_type(0);
        let r = self.call_any(&request, FIND_COORDINATOR_VERSION)?;
        let found = check(
            || Resource::Group(group.to_string()),
            r.error_code,
            r.error_message.as_ref(),
        )
        .map(|()| (r.node_id.0, host_port(&r.host, r.port)));
        Ok(found.into())
    }

    /// Runs `round` for the `keys` still pending until each has a final outcome, at most
    /// `1 + retries` times, pausing between rounds (the retry backoff, doubling, at most
    /// 1 s). A round that fails as a whole because a broker could not be reached is
    /// repeated too, if the request is `idempotent` or was not sent. A key `round` leaves
    /// out gets an error saying the broker did not answer for it.
    pub(super) fn rounds<K, T>(
        &mut self,
        keys: Vec<K>,
        idempotent: bool,
        mut round: impl FnMut(&mut Router, &[K]) -> Result<Vec<(K, Outcome<T>)>>,
    ) -> Result<BTreeMap<K, Result<T>>>
    where
        K: Ord + Clone + Display,
    {
        let mut done: BTreeMap<K, Result<T>> = BTreeMap::new();
        let mut pending = keys;
        pending.sort();
        pending.dedup();
        let mut attempt = 0u32;
        while !pending.is_empty() {
            let last_try = attempt >= self.settings.retries;
            let mut again = Vec::new();
            match round(self, &pending) {
                Ok(outcomes) => {
                    for (k, outcome) in outcomes {
                        if !pending.contains(&k) || done.contains_key(&k) || again.contains(&k) {
                            continue;
                        }
                        match outcome {
                            Outcome::Done(r) => {
                                done.insert(k, r);
                            }
                            Outcome::Retry(e) if last_try => {
                                done.insert(k, Err(e));
                            }
                            Outcome::Retry(_) => again.push(k),
                        }
                    }
                    for k in pending.drain(..) {
                        if !done.contains_key(&k) && !again.contains(&k) {
                            let reason = format!("the broker's answer has no result for {k}");
                            done.insert(k, Err(Error::corrupt("an admin response", 0, reason)));
                        }
                    }
                }
                Err(e) if !last_try && unreachable(&e) && (idempotent || not_sent(&e)) => {
                    again = std::mem::take(&mut pending);
                }
                Err(e) => return Err(e),
            }
            pending = again;
            if !pending.is_empty() {
                attempt += 1;
                let factor = 1u32 << (attempt - 1).min(10);
                std::thread::sleep((self.settings.retry_backoff * factor).min(MAX_BACKOFF));
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(retries: u32) -> Router {
        Router::new(
            vec!["127.0.0.1:1".into()],
            Settings {
                client_id: "test".into(),
                request_timeout: Duration::from_secs(1),
                retries,
                retry_backoff: Duration::from_millis(1),
                security: Default::default(),
                negotiate: false,
            },
        )
    }

    fn refusal(code: ErrorCode) -> Outcome<i32> {
        Err(AdminError::new(Resource::Cluster, code, None)).into()
    }

    #[test]
    fn retriable_items_are_asked_again_a_bounded_number_of_times() {
        let mut r = router(3);
        let mut asked: Vec<Vec<String>> = Vec::new();
        let out = r
            .rounds(
                vec!["a".to_string(), "b".into(), "c".into(), "a".into()],
                true,
                |_, pending| {
                    asked.push(pending.to_vec());
                    Ok(pending
                        .iter()
                        .map(|k| {
                            let o = match k.as_str() {
                                "a" => Outcome::Done(Ok(1)),
                                "b" => refusal(ErrorCode::NOT_CONTROLLER),
                                // Answered after two retriable refusals.
                                _ if asked.len() < 3 => refusal(ErrorCode::NOT_COORDINATOR),
                                _ => Outcome::Done(Ok(3)),
                            };
                            (k.clone(), o)
                        })
                        .collect())
                },
            )
            .unwrap();
        assert_eq!(asked[0], ["a", "b", "c"], "keys once each");
        assert_eq!(asked[1], ["b", "c"]);
        assert_eq!(asked.len(), 4, "1 + 3 retries");
        assert_eq!(asked[3], ["b"]);
        assert_eq!(*out["a"].as_ref().unwrap(), 1);
        assert_eq!(*out["c"].as_ref().unwrap(), 3);
        let b = out["b"].as_ref().unwrap_err();
        assert!(
            matches!(b, Error::Admin(e) if e.code == ErrorCode::NOT_CONTROLLER),
            "{b:?}"
        );
    }

    #[test]
    fn final_errors_are_not_retried_and_missing_answers_are_errors() {
        let mut r = router(5);
        let mut rounds = 0;
        let out = r
            .rounds(vec!["x".to_string(), "y".into()], true, |_, _| {
                rounds += 1;
                Ok(vec![(
                    "x".to_string(),
                    refusal(ErrorCode::TOPIC_ALREADY_EXISTS),
                )])
            })
            .unwrap();
        assert_eq!(rounds, 1);
        assert!(
            matches!(&out["x"], Err(Error::Admin(e)) if e.code == ErrorCode::TOPIC_ALREADY_EXISTS)
        );
        let y = out["y"].as_ref().unwrap_err().to_string();
        assert!(y.contains("no result for y"), "{y}");
    }

    #[test]
    fn an_unreachable_broker_is_retried_only_when_that_is_safe() {
        let io = |op| {
            Error::io(
                op,
                "127.0.0.1:1",
                std::io::ErrorKind::ConnectionRefused.into(),
            )
        };
        for (idempotent, op, expected_rounds) in [
            (true, "read from", 3),
            (false, "read from", 1),
            (false, "connect to", 3),
        ] {
            let mut r = router(2);
            let mut rounds = 0;
            let err = r
                .rounds(
                    vec!["k".to_string()],
                    idempotent,
                    |_, _| -> Result<Vec<(String, Outcome<()>)>> {
                        rounds += 1;
                        Err(io(op))
                    },
                )
                .unwrap_err();
            assert!(matches!(err, Error::Io { .. }));
            assert_eq!(rounds, expected_rounds, "{idempotent} {op}");
        }
    }

    #[test]
    fn no_reachable_bootstrap_address_names_them_all() {
        let mut r = router(0);
        r.bootstrap.push("127.0.0.1:2".into());
        let err = r.refresh(Some(&[])).unwrap_err().to_string();
        assert!(
            err.starts_with("reach any of 127.0.0.1:1,127.0.0.1:2: "),
            "{err}"
        );
    }
}
