//! `tidelog serve`: the Kafka wire protocol server over the data directory.
//!
//! Opens the broker on `--data`, serves it with [`tidelog::Server`] on each `--listen`
//! (default 127.0.0.1:9092; `PROTOCOL://HOST:PORT` for SSL, SASL_PLAINTEXT or SASL_SSL,
//! with `--tls-cert`/`--tls-key`, `--sasl-mechanisms`, `--authorizer`, `--super-users`)
//! until SIGINT or SIGTERM, then stops accepting, lets requests in flight finish, closes
//! every connection and closes the broker cleanly.
//!
//! With `--node-id N --quorum 1@host:port,...` the process is node N of a cluster: the
//! quorum elects a controller among the voters, topics are replicated as the controller
//! places them, and SIGTERM first moves this node's leaderships away (controlled
//! shutdown).
//! `--quorum-security-protocol SSL` makes the quorum port mutual TLS (the node's
//! `--tls-cert`/`--tls-key`, peers checked against `--quorum-ssl-ca-location`).
//!
//! Logs go to stderr through `tracing`, by default at info level for tidelog's own
//! targets and warnings for its dependencies (`RUST_LOG` overrides it, e.g.
//! `RUST_LOG=debug`): start-up (listen address, data directory, what recovery did),
//! topics created or deleted with the client id and address that asked, consumer group
//! rebalances (group, generation, members), segments deleted by retention, refused
//! connections and oversize requests (at most one line per peer address per 10 s),
//! shutdown. At debug level, each client connection with its client id and address.
//!
//! With `--metrics-listen HOST:PORT` the broker's metrics are served in the Prometheus
//! text format at `http://HOST:PORT/metrics` (see `metrics_http`).
//!
//! Before anything else it binds the listen addresses, so a port in use fails before the
//! data directory is created or locked, and raises its soft open-files limit to the hard
//! one (each connection costs a descriptor), printing how many connections fit.

use crate::cli::ServeArgs;
use crate::{CliResult, fail};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;
use tidelog::security::{ListenerProtocolMap, SaslMechanism, SecurityProtocol};
use tidelog::{Broker, ServerBuilder, ServerHandle};

/// The log filter when `RUST_LOG` is not set: what an operator needs from tidelog,
/// only warnings from the libraries under it.
const DEFAULT_LOG_FILTER: &str = "warn,tidelog=info";

/// A listener's security protocol and address, as `--listen` gives them.
type Listen = (SecurityProtocol, SocketAddr);

/// Runs the server until SIGINT or SIGTERM.
pub(crate) fn run(data: &Path, args: &ServeArgs) -> CliResult {
    init_logging();
    let (names, listens) = parse_listens(args)?;
    let mechanisms = sasl_mechanisms(args)?;
    let quorum_protocol = quorum_security_protocol(args)?;
    // A bug in one connection thread closes that connection only; the tool's hook (which
    // exits the process) would take every client down with it.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error in a server thread (please report it): {info}");
    }));
    // Bind before the data directory is touched: a port in use must not leave a created
    // or locked directory behind.
    let mut bound = bind_listeners(&listens)?.into_iter();
    let first = bound
        .next()
        .ok_or_else(|| fail!("give at least one --listen"))?;
    let metrics_listener = match &args.metrics_listen {
        Some(addr) => Some(bind_metrics(addr)?),
        None => None,
    };
    let files_limit = raise_open_files_limit();
    let broker = open_broker(data, args)?;
    let mut builder = server_builder(&broker, args, &names, &listens, first, bound, &mechanisms);
    if let (Some(node_id), Some(quorum)) = (args.node_id, &args.quorum) {
        builder = cluster_node(builder, args, node_id, quorum, quorum_protocol)?;
    }
    let server = builder.start()?;
    print_started(&server, data, args, &files_limit);
    let mut metrics_url = "off".to_string();
    if let Some(metrics) = metrics_listener {
        let addr = metrics
            .local_addr()
            .map_err(|e| fail!("cannot read the metrics listener's address: {e}"))?;
        crate::metrics_http::spawn(metrics, broker.clone())
            .map_err(|e| fail!("cannot start the metrics thread: {e}"))?;
        metrics_url = format!("http://{addr}/metrics");
        eprintln!("tidelog serve: metrics on {metrics_url}");
    }
    tracing::info!(
        listen = %server.local_addr(),
        data = %data.display(),
        metrics = %metrics_url,
        "tidelog serve started"
    );
    server.run_until_signal()?;
    tracing::info!(data = %data.display(), "data directory closed");
    eprintln!("tidelog serve: stopped");
    Ok(())
}

/// Logs to stderr through `tracing`, filtered by `RUST_LOG` or [`DEFAULT_LOG_FILTER`].
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// The `--listen` entries (with `--listener-security-protocol-map`): each listener's
/// name, and its protocol and address, in the order given.
fn parse_listens(args: &ServeArgs) -> CliResult<(Vec<String>, Vec<Listen>)> {
    let map: ListenerProtocolMap = match &args.listener_security_protocol_map {
        Some(m) => m
            .parse()
            .map_err(|e| fail!("--listener-security-protocol-map {m:?}: {e}"))?,
        None => Default::default(),
    };
    let mut listens = Vec::with_capacity(args.listen.len());
    let mut names: Vec<String> = Vec::with_capacity(args.listen.len());
    for spec in &args.listen {
        let (name, protocol, addr) = map
            .parse_listener(spec)
            .map_err(|e| fail!("--listen {spec:?}: {e}"))?;
        if names.contains(&name) {
            return Err(fail!(
                "--listen {spec:?}: a listener is named {name} already; give each --listen a name of its own (NAME://HOST:PORT, with NAME:PROTOCOL in --listener-security-protocol-map)"
            ));
        }
        names.push(name);
        let addr: SocketAddr = addr.parse().map_err(|e| {
            fail!(
                "--listen {spec:?} is not an IP address and port such as 127.0.0.1:9092 \
                 (optionally after PROTOCOL://): {e}"
            )
        })?;
        listens.push((protocol, addr));
    }
    Ok((names, listens))
}

/// `--sasl-mechanisms`, a comma-separated list.
fn sasl_mechanisms(args: &ServeArgs) -> CliResult<Vec<SaslMechanism>> {
    let mut mechanisms = Vec::new();
    for name in args
        .sasl_mechanisms
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        mechanisms.push(SaslMechanism::from_name(name).ok_or_else(|| {
            fail!("--sasl-mechanisms: {name:?} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        })?);
    }
    Ok(mechanisms)
}

/// Binds every listen address, in order.
fn bind_listeners(listens: &[Listen]) -> CliResult<Vec<(SecurityProtocol, TcpListener)>> {
    let mut bound = Vec::with_capacity(listens.len());
    for (protocol, listen) in listens {
        let listener = TcpListener::bind(listen).map_err(|e| {
            fail!("cannot listen on {listen}: {e} (is another server using that address?)")
        })?;
        bound.push((*protocol, listener));
    }
    Ok(bound)
}

/// Opens the broker on the data directory (`--log-dirs`,
/// `--replica-alter-log-dirs-io-max-bytes-per-second`, `--num-partitions`, `--max-partitions`,
/// `--offsets-topic-num-partitions`, `--log-retention-check-interval-ms`,
/// `--log-durable-acks`, the `--group-*` settings) and logs what opening it found.
fn open_broker(data: &Path, args: &ServeArgs) -> CliResult<Broker> {
    let opened = std::time::Instant::now();
    let mut broker = Broker::builder(data)
        .default_partitions(args.num_partitions)
        .offsets_topic_num_partitions(args.offsets_topic_num_partitions)
        .retention_check_interval(Duration::from_millis(args.log_retention_check_interval_ms))
        .durable_acks(args.log_durable_acks);
    broker = group_settings(broker, args)?;
    if let Some(max) = args.max_partitions {
        broker = broker.max_partitions(usize::try_from(max).unwrap_or(usize::MAX));
    }
    if !args.log_dirs.is_empty() {
        broker = broker.log_dirs(&args.log_dirs);
    }
    let broker = broker.open()?;
    broker.set_log_dir_move_rate(args.replica_alter_log_dirs_io_max_bytes_per_second);
    log_opened(&broker, opened.elapsed());
    Ok(broker)
}

/// The group settings (`--group-initial-rebalance-delay-ms`, the consumer-protocol and
/// share groups' session timeouts, heartbeat intervals and record lock duration with the
/// bounds of their group configs, the share groups' delivery count limit and record
/// locks per partition, `--group-share-max-size`, `--group-share-max-share-sessions`)
/// applied to `broker`. Refused as Kafka refuses
/// them, naming the flags: a bound of zero, a min above its max, a setting outside its
/// bounds, a heartbeat interval not below its session timeout.
fn group_settings(
    broker: tidelog::BrokerBuilder,
    args: &ServeArgs,
) -> CliResult<tidelog::BrokerBuilder> {
    let consumer_session = bounded(
        "consumer-{}session-timeout-ms",
        args.group_consumer_session_timeout_ms,
        args.group_consumer_min_session_timeout_ms,
        args.group_consumer_max_session_timeout_ms,
    )?;
    let consumer_heartbeat = bounded(
        "consumer-{}heartbeat-interval-ms",
        args.group_consumer_heartbeat_interval_ms,
        args.group_consumer_min_heartbeat_interval_ms,
        args.group_consumer_max_heartbeat_interval_ms,
    )?;
    below(
        "--group-consumer-heartbeat-interval-ms",
        consumer_heartbeat[0],
        "--group-consumer-session-timeout-ms",
        consumer_session[0],
    )?;
    let share_session = bounded(
        "share-{}session-timeout-ms",
        args.group_share_session_timeout_ms,
        args.group_share_min_session_timeout_ms,
        args.group_share_max_session_timeout_ms,
    )?;
    let share_heartbeat = bounded(
        "share-{}heartbeat-interval-ms",
        args.group_share_heartbeat_interval_ms,
        args.group_share_min_heartbeat_interval_ms,
        args.group_share_max_heartbeat_interval_ms,
    )?;
    below(
        "--group-share-heartbeat-interval-ms",
        share_heartbeat[0],
        "--group-share-session-timeout-ms",
        share_session[0],
    )?;
    let share_lock = bounded(
        "share-{}record-lock-duration-ms",
        args.group_share_record_lock_duration_ms,
        args.group_share_min_record_lock_duration_ms,
        args.group_share_max_record_lock_duration_ms,
    )?;
    let share = tidelog::coordinator::ShareConfig {
        session_timeout: share_session[0],
        min_session_timeout: share_session[1],
        max_session_timeout: share_session[2],
        heartbeat_interval: share_heartbeat[0],
        min_heartbeat_interval: share_heartbeat[1],
        max_heartbeat_interval: share_heartbeat[2],
        record_lock_duration: share_lock[0],
        min_record_lock_duration: share_lock[1],
        max_record_lock_duration: share_lock[2],
        // Both within their ranges: clap checked them.
        delivery_count_limit: i16::try_from(args.group_share_delivery_count_limit)
            .unwrap_or(i16::MAX),
        partition_max_record_locks: usize::from(args.group_share_partition_max_record_locks),
        max_size: usize::try_from(args.group_share_max_size).unwrap_or(usize::MAX),
        max_share_sessions: usize::try_from(args.group_share_max_share_sessions)
            .unwrap_or(usize::MAX),
        ..tidelog::coordinator::ShareConfig::default()
    };
    Ok(broker
        .group_initial_rebalance_delay(Duration::from_millis(args.group_initial_rebalance_delay_ms))
        .group_consumer_session_timeout(consumer_session[0])
        .group_consumer_session_timeout_bounds(consumer_session[1], consumer_session[2])
        .group_consumer_heartbeat_interval(consumer_heartbeat[0])
        .group_consumer_heartbeat_interval_bounds(consumer_heartbeat[1], consumer_heartbeat[2])
        .share(share))
}

/// The setting `--group-NAME` (`{}` in `name` left out) and its bounds `--group-NAME`
/// with `{}` as `min-` and `max-`, as durations: value, min, max. Each must be above
/// zero, the min at most the max, and the value within them.
fn bounded(name: &str, value: u64, min: u64, max: u64) -> CliResult<[Duration; 3]> {
    let flag = |part: &str| format!("--group-{}", name.replace("{}", part));
    let (it, lo, hi) = (flag(""), flag("min-"), flag("max-"));
    if min == 0 || max == 0 {
        return Err(fail!("{lo} {min} and {hi} {max}: neither may be 0"));
    }
    if min > max {
        return Err(fail!("{lo} {min} is above {hi} {max}"));
    }
    if value < min || value > max {
        return Err(fail!("{it} {value} is outside {lo} {min} and {hi} {max}"));
    }
    Ok([value, min, max].map(Duration::from_millis))
}

/// Refuses a heartbeat interval `interval` (flag `a`) not below its session timeout
/// `session` (flag `b`), as Kafka does.
fn below(a: &str, interval: Duration, b: &str, session: Duration) -> CliResult {
    if interval >= session {
        return Err(fail!(
            "{a} {} is not below {b} {}",
            interval.as_millis(),
            session.as_millis()
        ));
    }
    Ok(())
}

/// The server of `broker` on the bound listeners (`first`'s name and protocol are the
/// server's own; `others` are added by name), with the options of a single node:
/// limits, security, TLS and advertised addresses.
fn server_builder(
    broker: &Broker,
    args: &ServeArgs,
    names: &[String],
    listens: &[Listen],
    (protocol, listener): (SecurityProtocol, TcpListener),
    others: impl Iterator<Item = (SecurityProtocol, TcpListener)>,
    mechanisms: &[SaslMechanism],
) -> ServerBuilder {
    let listen = listens[0].1;
    let mut builder = tidelog::Server::builder(broker.clone())
        .listen(listen)
        .listener(listener)
        .fetch_max_wait(Duration::from_millis(args.fetch_max_wait_ms))
        .fetch_max_bytes(args.fetch_max_bytes as usize)
        .max_queued_request_bytes(args.max_queued_request_bytes)
        .max_connections(args.max_connections)
        .max_connections_per_ip(args.max_connections_per_ip.unwrap_or(usize::MAX))
        .max_connections_per_ip_overrides(args.max_connections_per_ip_overrides.as_str())
        .max_request_size(args.max_request_size)
        .max_request_partition_size_limit(args.max_request_partition_size_limit as usize)
        .auto_create_topics(!args.no_auto_create_topics)
        .security_protocol(protocol)
        .listener_name(names[0].clone())
        .sasl_mechanisms(mechanisms)
        .authorizer(args.authorizer)
        .super_users(&args.super_users);
    for ((protocol, listener), name) in others.zip(names.iter().skip(1)) {
        builder = builder.add_bound_named_listener(name.clone(), protocol, listener);
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let mut tls = tidelog::security::TlsSettings::from_pem_files(cert, key);
        if let Some(ca) = &args.tls_client_ca {
            tls = tls.client_ca(ca);
        }
        builder = builder.tls(tls);
    }
    if !args.advertised.is_empty() {
        builder = builder.advertised(args.advertised.join(","));
    }
    builder
}

/// The options of node `node_id` of the cluster of `quorum`: replication, leader
/// balancing, and how the node reaches the others (inter-broker listener, certificate,
/// SASL login, CAs; the quorum port's protocol).
fn cluster_node(
    builder: ServerBuilder,
    args: &ServeArgs,
    node_id: i32,
    quorum: &str,
    quorum_protocol: SecurityProtocol,
) -> CliResult<ServerBuilder> {
    let mut builder = builder
        .node_id(node_id)
        .quorum(quorum.to_string())
        .broker_session_timeout(Duration::from_millis(args.broker_session_timeout_ms))
        .default_replication_factor(args.default_replication_factor)
        .min_insync_replicas(args.min_insync_replicas)
        .replica_lag_time_max(Duration::from_millis(args.replica_lag_time_max_ms))
        .offsets_topic_replication_factor(args.offsets_topic_replication_factor)
        .auto_leader_rebalance(args.auto_leader_rebalance_enable)
        .leader_imbalance_check_interval(Duration::from_secs(
            args.leader_imbalance_check_interval_seconds,
        ))
        .leader_imbalance_per_broker_percentage(args.leader_imbalance_per_broker_percentage);
    builder = builder.follower_fetch_without_epoch(args.follower_fetch_without_epoch);
    if let Some(rack) = &args.rack {
        builder = builder.broker_rack(rack.clone());
    }
    if let Some(class) = &args.replica_selector_class {
        builder = builder.replica_selector_class(class)?;
    }
    if let Some(name) = &args.inter_broker_listener {
        builder = builder.inter_broker_listener_name(name.clone());
    }
    if let (Some(cert), Some(key)) = (
        &args.inter_broker_ssl_certificate_location,
        &args.inter_broker_ssl_key_location,
    ) {
        builder = builder.inter_broker_client_cert(cert, key);
    }
    if let Some(m) = &args.inter_broker_sasl_mechanism {
        let mechanism = SaslMechanism::from_name(&m.to_ascii_uppercase()).ok_or_else(|| {
            fail!("--inter-broker-sasl-mechanism {m:?}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        })?;
        let user = args.inter_broker_sasl_username.clone().ok_or_else(|| {
            fail!("--inter-broker-sasl-mechanism needs --inter-broker-sasl-username")
        })?;
        let password = std::env::var("TIDELOG_INTER_BROKER_SASL_PASSWORD").map_err(|_| {
            fail!("--inter-broker-sasl-mechanism needs the password in TIDELOG_INTER_BROKER_SASL_PASSWORD")
        })?;
        builder = builder.inter_broker_sasl(mechanism, user, password);
    }
    if let Some(ca) = &args.inter_broker_ssl_ca_location {
        builder = builder.inter_broker_ca(ca);
    }
    builder = builder.quorum_security_protocol(quorum_protocol);
    if let Some(ca) = &args.quorum_ssl_ca_location {
        builder = builder.quorum_ca(ca);
    }
    Ok(builder)
}

/// The start-up lines on stderr: where the server listens, its listeners (unless a
/// single PLAINTEXT one) and how many connections the open-files limit allows.
fn print_started(server: &ServerHandle, data: &Path, args: &ServeArgs, files_limit: &str) {
    let role = match server.node_id() {
        Some(id) => format!(" as node {id} of the cluster"),
        None => String::new(),
    };
    eprintln!(
        "tidelog serve: Kafka protocol on {} for {}{role}{} (SIGINT or SIGTERM to stop)",
        server.local_addr(),
        data.display(),
        if args.authorizer {
            ", ACLs enforced"
        } else {
            ""
        }
    );
    let listeners = server.named_listeners();
    if listeners.len() > 1 || listeners[0].1 != SecurityProtocol::Plaintext {
        let all: Vec<String> = listeners
            .iter()
            .map(|(n, p, a)| {
                if n == p.name() {
                    format!("{n}://{a}")
                } else {
                    format!("{n}://{a} ({p})")
                }
            })
            .collect();
        eprintln!("tidelog serve: listeners {}", all.join(", "));
    }
    eprintln!(
        "tidelog serve: open-files limit {files_limit}: up to {} connections",
        server.max_connections()
    );
}

/// `--quorum-security-protocol` and the flags it needs, checked before anything is bound
/// or opened (the files are read when the node starts).
fn quorum_security_protocol(args: &ServeArgs) -> CliResult<tidelog::security::SecurityProtocol> {
    let protocol = match args.quorum_security_protocol.as_deref() {
        None => SecurityProtocol::Plaintext,
        Some(p) => match p.parse() {
            Ok(protocol @ (SecurityProtocol::Plaintext | SecurityProtocol::Ssl)) => protocol,
            Ok(other) => {
                return Err(fail!(
                    "--quorum-security-protocol {other}: the quorum port speaks PLAINTEXT or SSL (mutual TLS), not SASL"
                ));
            }
            Err(_) => {
                return Err(fail!(
                    "--quorum-security-protocol {p:?}: unknown protocol; PLAINTEXT or SSL"
                ));
            }
        },
    };
    match (protocol, &args.quorum_ssl_ca_location) {
        (SecurityProtocol::Ssl, None) => Err(fail!(
            "--quorum-security-protocol SSL needs --quorum-ssl-ca-location FILE, the CA that signed the nodes' certificates"
        )),
        (SecurityProtocol::Ssl, Some(_)) if args.tls_cert.is_none() => Err(fail!(
            "--quorum-security-protocol SSL needs --tls-cert and --tls-key, this node's certificate and key (its server and client certificate on the quorum port)"
        )),
        (SecurityProtocol::Plaintext, Some(ca)) => Err(fail!(
            "--quorum-ssl-ca-location {} needs --quorum-security-protocol SSL",
            ca.display()
        )),
        _ => Ok(protocol),
    }
}

/// Binds `--metrics-listen`'s address (before the data directory is touched, as the
/// Kafka listener).
pub(crate) fn bind_metrics(addr: &str) -> CliResult<TcpListener> {
    let parsed: SocketAddr = addr.parse().map_err(|e| {
        fail!("--metrics-listen {addr:?} is not an IP address and port such as 127.0.0.1:9644: {e}")
    })?;
    TcpListener::bind(parsed).map_err(|e| {
        fail!("cannot listen for metrics on {parsed}: {e} (is another server using that address?)")
    })
}

/// Logs what opening the data directory found: topics, partitions and recovery.
fn log_opened(broker: &tidelog::Broker, took: Duration) {
    let m = broker.metrics();
    let r = &m.storage.recovery;
    let topics = broker.topics().map_or(0, |t| t.len());
    tracing::info!(
        data = %broker.dir().display(),
        topics,
        partitions = m.partitions.len(),
        seconds = took.as_secs_f64(),
        segments_trusted = r.segments_trusted,
        segments_validated = r.segments_validated,
        bytes_validated = r.bytes_validated,
        "data directory opened"
    );
    if r.logs_repaired > 0 {
        tracing::warn!(
            logs = r.logs_repaired,
            truncations = r.truncations,
            segments_removed = r.segments_removed,
            indexes_rebuilt = r.indexes_rebuilt,
            checkpoints_damaged = r.checkpoints_damaged,
            "recovery repaired logs (an unclean shutdown or damaged files)"
        );
    }
}

/// Raises the soft open-files limit to the hard one; says what the limit is (and what it
/// was, if raised) for the start-up line.
fn raise_open_files_limit() -> String {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let show = |l: Option<u64>| l.map_or_else(|| "unlimited".to_string(), |l| l.to_string());
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    if current == maximum {
        return show(current);
    }
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: maximum,
            maximum,
        },
    ) {
        Ok(()) => format!("{} (raised from {})", show(maximum), show(current)),
        Err(e) => {
            tracing::warn!(
                soft = show(current),
                hard = show(maximum),
                error = %e,
                "cannot raise the open-files limit to its hard limit"
            );
            show(current)
        }
    }
}
