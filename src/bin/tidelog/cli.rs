//! Argument definitions (clap derive). Option names follow Kafka's tools and kcat.

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// tidelog: an embeddable, Kafka-compatible commit log — command line tool.
///
/// Every subcommand works on the data directory given by --data (one process at a
/// time holds it); `topics` and `groups` with --bootstrap act on a running node or
/// cluster over the Kafka protocol instead, and so does `consume --group --bootstrap`.
#[derive(Debug, Parser)]
#[command(name = "tidelog", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// Data directory of the log [default: ./tidelog-data; `perf` without --data works
    /// in a temporary directory that it removes afterwards].
    #[arg(long, value_name = "DIR", global = true)]
    pub data: Option<PathBuf>,

    /// Show no progress bars (they show on a terminal for long work; the environment
    /// variable TIDELOG_PROGRESS=always|never|auto decides otherwise).
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// The data directory of every command but `perf` when `--data` is not given.
pub(crate) const DEFAULT_DATA: &str = "./tidelog-data";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create, list, describe, delete and alter topics (as kafka-topics).
    Topics(TopicsArgs),
    /// Append one record per line of standard input (as kcat -P).
    Produce(ProduceArgs),
    /// Print records of a topic (as kcat -C and kafka-console-consumer).
    Consume(ConsumeArgs),
    /// List and describe consumer groups, reset their offsets (as kafka-consumer-groups).
    Groups(GroupsArgs),
    /// Print the batches of a segment file or the entries of an index (as kafka-dump-log).
    Dump(DumpArgs),
    /// Measure throughput and latency (as kafka-producer-perf-test).
    #[command(subcommand)]
    Perf(PerfCmd),
    /// Serve the data directory over the Kafka wire protocol.
    #[cfg(feature = "server")]
    Serve(Box<ServeArgs>),
    /// Copy local topics to a remote Kafka-API cluster as they are written, each record
    /// exactly once, until SIGINT or SIGTERM (store-and-forward).
    #[cfg(feature = "server")]
    Forward(ForwardArgs),
    /// Add, delete and list users' SCRAM credentials (as kafka-configs --entity-type
    /// users): on a stopped single node's data directory, or with --bootstrap on a
    /// running node or cluster.
    #[cfg(feature = "server")]
    Users(UsersArgs),
    /// Add, list and remove ACLs (as kafka-acls): on a stopped single node's data
    /// directory, or with --bootstrap on a running node or cluster.
    #[cfg(feature = "server")]
    Acls(AclsArgs),
    /// Move partition leaderships back to their preferred replicas, or elect a leader
    /// from outside the ISR (as kafka-leader-election), on a running cluster.
    #[cfg(feature = "server")]
    LeaderElection(crate::partitions::LeaderElectionArgs),
    /// Describe each broker's log directories and the partition logs in them (as
    /// kafka-log-dirs), or move partitions between a broker's log directories, on a
    /// running node or cluster.
    #[cfg(feature = "server")]
    LogDirs(crate::partitions::LogDirsArgs),
    /// Move partitions to other brokers: generate a balanced plan, execute, verify,
    /// cancel or list moves (as kafka-reassign-partitions), on a running cluster.
    #[cfg(feature = "server")]
    Reassign(crate::partitions::ReassignArgs),
    /// Describe, reset and delete the start offsets of share groups (as
    /// kafka-share-groups), on a running node or cluster; needs --bootstrap.
    #[cfg(feature = "server")]
    ShareGroups(ShareGroupsArgs),
    /// Describe the metadata quorum of a running cluster and add or remove its voters
    /// (as kafka-metadata-quorum); needs --bootstrap.
    #[cfg(feature = "server")]
    Quorum(QuorumArgs),
    /// Describe the nodes of a running cluster: role, listener, liveness and the
    /// replicas each holds; needs --bootstrap.
    #[cfg(feature = "server")]
    Cluster(ClusterArgs),
    /// Set, remove and list client quotas (as kafka-configs --entity-type
    /// clients|users): on a stopped single node's data directory, or with --bootstrap on
    /// a running node or cluster.
    #[cfg(feature = "server")]
    Configs(ConfigsArgs),
    /// Describe, upgrade and downgrade a running cluster's feature levels
    /// (transaction.version), as kafka-features; needs --bootstrap.
    #[cfg(feature = "server")]
    Features(crate::features::FeaturesArgs),
    /// Format a cluster node's data directory before its first start (as kafka-storage
    /// format): its cluster id, node id, directory id and the voters the quorum starts
    /// with.
    #[cfg(feature = "server")]
    Format(crate::storage_format::FormatArgs),
}

/// `tidelog cluster --bootstrap ADDRS ...`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct ClusterArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: ClusterCmd,
}

/// `tidelog cluster ...`.
#[cfg(feature = "server")]
#[derive(Debug, Subcommand)]
pub(crate) enum ClusterCmd {
    /// Every node: id, role (voter or broker), listener, liveness, and the replicas it
    /// holds (how many, how many it leads, which).
    Describe,
    /// Move every replica node N holds to the other nodes (reassignments, each replica
    /// in place to the least loaded node without one) and wait until it holds none,
    /// printing the progress.
    Drain {
        /// The node to drain.
        #[arg(long, value_name = "N")]
        node: i32,
        /// Give up waiting after this many seconds (the moves go on).
        #[arg(long, value_name = "SECS", default_value_t = 600)]
        timeout: u64,
    },
    /// Remove a retired node from the cluster (UnregisterBroker): refused while it is a
    /// voter, runs, or holds a replica (drain and stop it first).
    Unregister {
        /// The node to remove.
        #[arg(long, value_name = "N")]
        node: i32,
    },
}

/// `tidelog share-groups --bootstrap ADDRS ...`.
#[cfg(feature = "server")]
pub(crate) type ShareGroupsArgs = GroupCommand<ShareGroupsCmd>;

/// `tidelog share-groups ...`.
#[cfg(feature = "server")]
#[derive(Debug, Subcommand)]
pub(crate) enum ShareGroupsCmd {
    /// The start offset of each share-partition of the group (every record before it
    /// is acknowledged or archived), its leader epoch and its lag.
    Describe {
        /// The share group.
        group: String,
    },
    /// Move the start offsets of a share group with no active member: each
    /// share-partition starts there again with no record in flight.
    ResetOffsets(ResetOffsetsArgs),
    /// Delete the state of a share group (with no active member) on whole topics: it
    /// reads them next as topics it never read (share.auto.offset.reset).
    DeleteOffsets {
        /// The share group.
        group: String,
        /// A topic (repeat for several).
        #[arg(long, value_name = "T", required = true)]
        topic: Vec<String>,
    },
}

/// `tidelog quorum --bootstrap ADDRS ...`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct QuorumArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: QuorumCmd,
}

/// `tidelog quorum ...`.
#[cfg(feature = "server")]
#[derive(Debug, Subcommand)]
pub(crate) enum QuorumCmd {
    /// The controller, its epoch, the high watermark of the metadata log, and each
    /// voter's and observer's (broker-only node's) progress.
    Describe,
    /// Make a broker-only node that follows the metadata log a voter (AddRaftVoter).
    AddVoter {
        /// The node's id.
        #[arg(long, value_name = "N")]
        node_id: i32,
        /// The node's directory id (its meta.properties' directory.id) [default: the
        /// one it registered with].
        #[arg(long, value_name = "ID")]
        directory_id: Option<String>,
    },
    /// Remove a voter (RemoveRaftVoter); a node still running goes on as a broker only.
    RemoveVoter {
        /// The voter's id.
        #[arg(long, value_name = "N")]
        node_id: i32,
        /// The voter's directory id [default: the one the quorum knows it by].
        #[arg(long, value_name = "ID")]
        directory_id: Option<String>,
    },
}

/// `tidelog configs [--bootstrap ADDRS] --alter|--describe ...` (kafka-configs' names).
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct ConfigsArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    /// Change the entity's quotas with --add-config and --delete-config.
    #[arg(long)]
    pub alter: bool,
    /// List the quotas of the entities the options name (every one without them).
    #[arg(long)]
    pub describe: bool,
    /// clients or users (quotas), or brokers (a cluster's dynamic broker configs).
    #[arg(long, value_name = "TYPE")]
    pub entity_type: Option<String>,
    /// The client id or user of --entity-type (a node id for brokers).
    #[arg(long, value_name = "NAME")]
    pub entity_name: Option<String>,
    /// The default of --entity-type: every client id, user or broker without a value of
    /// its own.
    #[arg(long)]
    pub entity_default: bool,
    /// A user (the principal's name): with --client or --client-defaults, the quota of
    /// that user's client id.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The default user.
    #[arg(long)]
    pub user_defaults: bool,
    /// A client id.
    #[arg(long, value_name = "ID")]
    pub client: Option<String>,
    /// The default client id.
    #[arg(long)]
    pub client_defaults: bool,
    /// A broker (node id): as --entity-type brokers --entity-name N.
    #[arg(long, value_name = "N")]
    pub broker: Option<String>,
    /// Every broker without a value of its own: as --entity-type brokers
    /// --entity-default.
    #[arg(long)]
    pub broker_defaults: bool,
    /// Quotas to set, KEY=VALUE[,KEY=VALUE...]: producer_byte_rate and
    /// consumer_byte_rate (bytes per second), request_percentage (percent of one
    /// thread's time); for brokers leader.replication.throttled.rate and
    /// follower.replication.throttled.rate (bytes per second).
    #[arg(long, value_name = "KEY=VALUE")]
    pub add_config: Vec<String>,
    /// Quotas (or broker configs) to remove, KEY[,KEY...].
    #[arg(long, value_name = "KEY")]
    pub delete_config: Vec<String>,
}

/// `tidelog users [--bootstrap ADDRS] ...`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct UsersArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: UsersCmd,
}

/// `tidelog acls [--bootstrap ADDRS] ...`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct AclsArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: AclsCmd,
}

/// `tidelog users ...`.
#[cfg(feature = "server")]
#[derive(Debug, Subcommand)]
pub(crate) enum UsersCmd {
    /// Add a user, or replace its password, for SCRAM (and PLAIN, checked against it).
    Add {
        /// The user name (the principal is User:NAME).
        name: String,
        /// The password; without it, the first line of standard input is read (which
        /// keeps it out of the process list and the shell history).
        #[arg(long, value_name = "PASSWORD")]
        password: Option<String>,
        /// SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both [default: both].
        #[arg(long, value_name = "MECHANISM")]
        mechanism: Vec<String>,
        /// PBKDF2 iterations, 4096 to 16384.
        #[arg(long, value_name = "N", default_value_t = 4096)]
        iterations: u32,
    },
    /// Delete a user's credentials.
    Delete {
        /// The user name.
        name: String,
        /// Only this mechanism's credential (repeat for several) [default: every one].
        #[arg(long, value_name = "MECHANISM")]
        mechanism: Vec<String>,
    },
    /// List users with their mechanisms and iterations.
    List,
}

/// The resource and entry options of `tidelog acls` (kafka-acls' names).
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct AclArgs {
    /// Principal allowed (User:NAME, User:* for everyone); repeat for several.
    #[arg(long, value_name = "PRINCIPAL")]
    pub allow_principal: Vec<String>,
    /// Principal denied; repeat for several. A deny beats every allow.
    #[arg(long, value_name = "PRINCIPAL")]
    pub deny_principal: Vec<String>,
    /// Client IP address the allow entries apply to [default: * (any)].
    #[arg(long, value_name = "HOST")]
    pub allow_host: Option<String>,
    /// Client IP address the deny entries apply to [default: * (any)].
    #[arg(long, value_name = "HOST")]
    pub deny_host: Option<String>,
    /// Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
    /// AlterConfigs, IdempotentWrite or All; repeat for several.
    #[arg(long, value_name = "OPERATION")]
    pub operation: Vec<String>,
    /// A topic (* for every topic).
    #[arg(long, value_name = "T")]
    pub topic: Option<String>,
    /// A consumer group (* for every group).
    #[arg(long, value_name = "G")]
    pub group: Option<String>,
    /// The cluster.
    #[arg(long)]
    pub cluster: bool,
    /// A transactional id.
    #[arg(long, value_name = "ID")]
    pub transactional_id: Option<String>,
    /// literal or prefixed (add); also any or match (list, remove) [default: literal
    /// for add, any for list and remove].
    #[arg(long, value_name = "TYPE")]
    pub resource_pattern_type: Option<String>,
}

/// `tidelog acls ...`.
#[cfg(feature = "server")]
#[derive(Debug, Subcommand)]
pub(crate) enum AclsCmd {
    /// Add ACLs: every principal given with every operation on the resource.
    Add(AclArgs),
    /// List ACLs, all or those matching the options given.
    List(AclArgs),
    /// Remove the ACLs matching the options given.
    Remove(AclArgs),
}

/// `tidelog forward --bootstrap ADDRS [--topic T ...] [--rename FROM=TO ...]`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct ForwardArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    /// A local topic to forward (repeat for several) [default: every topic that is not
    /// internal].
    #[arg(long = "topic", short = 't', value_name = "TOPIC")]
    pub topics: Vec<String>,
    /// Write local topic FROM to remote topic TO (repeat for several).
    #[arg(long, value_name = "FROM=TO")]
    pub rename: Vec<String>,
    /// The forwarder's name: its records' source header, and the consumer group
    /// tidelog-forward-NAME its position is committed as.
    #[arg(long, default_value = "default")]
    pub name: String,
    /// Let local retention delete records not forwarded yet (each loss is logged and
    /// counted) [default: retention waits for the forwarder].
    #[arg(long)]
    pub allow_retention_loss: bool,
    /// Forward with an idempotent producer only, for a cluster without transactions
    /// (or that refuses them to this client) [default: each chunk is a transaction of
    /// the transactional id tidelog-forward-NAME].
    #[arg(long, conflicts_with_all = ["release", "describe"])]
    pub no_transactions: bool,
    /// Release the retention holds forwarder NAME left on the local partitions, and
    /// exit: for a forwarder retired for good (one started again holds again).
    #[arg(long, conflicts_with_all = ["allow_retention_loss", "metrics_listen"])]
    pub release: bool,
    /// Print where forwarder NAME stands (per local partition its position, the end and
    /// the records behind, and its last error while it fails), read from the data
    /// directory, and exit: it may run in another process or be stopped.
    #[arg(long, conflicts_with_all = ["allow_retention_loss", "metrics_listen", "release"])]
    pub describe: bool,
    /// Serve the forwarder's and the broker's metrics in the Prometheus text format at
    /// http://HOST:PORT/metrics (port 0 picks a free port; the address is printed).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
}

/// `--bootstrap`: act on a running node or cluster instead of a data directory.
#[derive(Debug, Args)]
pub(crate) struct Bootstrap {
    /// Act on the running node or cluster at these addresses over the Kafka protocol
    /// (as kafka-topics --bootstrap-server), instead of opening a data directory: the
    /// first that answers tells where the brokers, the controller and each group's
    /// coordinator are.
    #[arg(
        long,
        alias = "bootstrap-server",
        value_name = "HOST:PORT[,HOST:PORT...]",
        global = true
    )]
    pub bootstrap: Option<String>,
    /// With --bootstrap: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's
    /// security.protocol) [default: PLAINTEXT].
    #[arg(long, value_name = "PROTOCOL", global = true)]
    pub security_protocol: Option<String>,
    /// With --bootstrap: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's sasl.mechanism).
    #[arg(long, value_name = "MECHANISM", global = true)]
    pub sasl_mechanism: Option<String>,
    /// With --bootstrap: the SASL user name (Kafka's sasl.username).
    #[arg(long, value_name = "USER", global = true)]
    pub sasl_username: Option<String>,
    /// With --bootstrap: the SASL password (Kafka's sasl.password); without it, the
    /// TIDELOG_SASL_PASSWORD environment variable, which keeps it out of the process list.
    #[arg(long, value_name = "PASSWORD", global = true)]
    pub sasl_password: Option<String>,
    /// With --bootstrap: PEM file of the CA that signed the brokers' certificates
    /// (Kafka's ssl.ca.location).
    #[arg(long, value_name = "FILE", global = true)]
    pub ssl_ca_location: Option<PathBuf>,
    /// With --bootstrap: PEM file of this client's certificate, for listeners that
    /// require one (Kafka's ssl.certificate.location); needs --ssl-key-location.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        requires = "ssl_key_location"
    )]
    pub ssl_certificate_location: Option<PathBuf>,
    /// With --bootstrap: PEM file of the private key of --ssl-certificate-location
    /// (Kafka's ssl.key.location).
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        requires = "ssl_certificate_location"
    )]
    pub ssl_key_location: Option<PathBuf>,
}

/// `tidelog topics [--bootstrap ADDRS] ...`.
#[derive(Debug, Args)]
pub(crate) struct TopicsArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: TopicsCmd,
}

/// `tidelog groups [--bootstrap ADDRS] ...`.
pub(crate) type GroupsArgs = GroupCommand<GroupsCmd>;

/// A command on groups (`tidelog groups`, `tidelog share-groups`): where they are, and
/// its subcommand `C`.
#[derive(Debug, Args)]
pub(crate) struct GroupCommand<C: Subcommand> {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: C,
}

/// `tidelog topics ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum TopicsCmd {
    /// Create a topic.
    Create {
        /// Topic name: 1 to 249 characters from [a-zA-Z0-9._-].
        name: String,
        /// Number of partitions [default: 1; with --bootstrap, the broker's
        /// num.partitions].
        #[arg(long, value_name = "N")]
        partitions: Option<i32>,
        /// Copies of each partition, on as many nodes (with --bootstrap) [default: the
        /// broker's default.replication.factor; a data directory holds one].
        #[arg(long, value_name = "N")]
        replication_factor: Option<i16>,
        /// A topic setting by its Kafka name (retention.ms, cleanup.policy, ...);
        /// repeat for several.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// Succeed without change if the topic already exists.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// List topic names, one per line.
    List {
        /// Leave out internal topics (__consumer_offsets).
        #[arg(long)]
        exclude_internal: bool,
    },
    /// Per partition: log start and end offset, size and segment count; with
    /// --bootstrap, leader, replicas, in-sync replicas, log start offset and high
    /// watermark (as kafka-topics --describe).
    Describe {
        /// The topic (every topic if left out).
        name: Option<String>,
        /// With no NAME: leave out internal topics.
        #[arg(long)]
        exclude_internal: bool,
    },
    /// Delete a topic and its data.
    Delete {
        /// The topic.
        name: String,
    },
    /// Change a topic's settings or grow its partition count.
    #[command(group(ArgGroup::new("change").required(true).multiple(true)))]
    Alter {
        /// The topic.
        name: String,
        /// Set a topic setting by its Kafka name; repeat for several.
        #[arg(long = "config", value_name = "KEY=VALUE", group = "change")]
        config: Vec<String>,
        /// Remove a topic setting (back to the default); repeat for several.
        #[arg(long = "delete-config", value_name = "KEY", group = "change")]
        delete_config: Vec<String>,
        /// Grow the topic to N partitions (shrinking is refused, as in Kafka).
        #[arg(long, value_name = "N", group = "change")]
        partitions: Option<i32>,
    },
}

/// `tidelog produce TOPIC`.
#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// The topic.
    pub topic: String,
    /// Split each line at the first SEP into key and value (as kcat -K).
    #[arg(short = 'K', long = "key-delimiter", value_name = "SEP")]
    pub key_delimiter: Option<String>,
    /// Write every record to this partition (default: by key hash, unkeyed records
    /// spread over the partitions).
    #[arg(short = 'p', long, value_name = "P")]
    pub partition: Option<i32>,
    /// A header added to every record; repeat for several.
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE")]
    pub headers: Vec<String>,
    /// Compress batches with CODEC: none, gzip, snappy, lz4 or zstd (as kcat -z; a topic
    /// whose compression.type names a codec overrides it).
    #[arg(
        short = 'z',
        long = "compression",
        value_name = "CODEC",
        default_value = "none"
    )]
    pub compression: tidelog::Compression,
}

/// `tidelog consume TOPIC`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("start").args(["from_beginning", "offset", "timestamp"])))]
pub(crate) struct ConsumeArgs {
    /// The topic.
    pub topic: String,
    /// Start at the first record (with --group: in partitions where the group has no
    /// committed offset, as auto.offset.reset=earliest).
    #[arg(long)]
    pub from_beginning: bool,
    /// Start offset: N, -N (N before the end), `beginning` or `end` (as kcat -o).
    #[arg(short = 'o', long, value_name = "OFFSET", allow_hyphen_values = true)]
    pub offset: Option<String>,
    /// Start at the first record at or after this time: milliseconds since the epoch or
    /// an RFC 3339 date (2024-05-01T12:00:00Z).
    #[arg(long, value_name = "T")]
    pub timestamp: Option<String>,
    /// Consume as a member of consumer group G (as kafka-console-consumer --group):
    /// read the partitions the group assigns, from its committed offsets (else the end,
    /// or the beginning with --from-beginning), and commit the position of each on exit.
    #[arg(short = 'g', long, value_name = "G", conflicts_with_all = ["partition", "offset", "timestamp"])]
    pub group: Option<String>,
    /// With --bootstrap: read that running node or cluster over the Kafka protocol (as
    /// kafka-console-consumer --bootstrap-server), as a member of --group or not.
    #[command(flatten)]
    pub target: Bootstrap,
    /// Read only these partitions (repeat for several; default: all).
    #[arg(short = 'p', long, value_name = "P")]
    pub partition: Vec<i32>,
    /// Exit after COUNT records.
    #[arg(short = 'c', long, value_name = "COUNT")]
    pub count: Option<u64>,
    /// Exit when every partition read has reached its end.
    #[arg(short = 'e', long = "exit")]
    pub exit_at_end: bool,
    /// Output format with kcat's tokens: %s value, %k key, %t topic, %p partition,
    /// %o offset, %T timestamp (ms), %h headers (k=v,...), %S value size, %K key size,
    /// %%; escapes \n \t \r \\. Default: "%s\n" (or "%k<SEP>%s\n" with -K).
    #[arg(short = 'f', long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// Print the key, then SEP, then the value (when -f is not given).
    #[arg(short = 'K', long = "key-delimiter", value_name = "SEP")]
    pub key_delimiter: Option<String>,
    /// Which records of transactions to print (Kafka's isolation.level):
    /// read_committed prints only committed ones, up to the last stable offset;
    /// read_uncommitted (the default, as Kafka's) every record.
    #[arg(
        long,
        value_enum,
        value_name = "LEVEL",
        default_value = "read_uncommitted"
    )]
    pub isolation_level: Isolation,
}

/// `--isolation-level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Isolation {
    /// Every record, up to the high watermark.
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    /// Committed records only, up to the last stable offset.
    #[value(name = "read_committed")]
    ReadCommitted,
}

impl Isolation {
    /// The library's level.
    pub(crate) fn level(self) -> tidelog::IsolationLevel {
        match self {
            Isolation::ReadUncommitted => tidelog::IsolationLevel::ReadUncommitted,
            Isolation::ReadCommitted => tidelog::IsolationLevel::ReadCommitted,
        }
    }
}

/// `tidelog groups ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum GroupsCmd {
    /// List consumer groups, one per line.
    List,
    /// State, members and, per partition, committed offset, log end offset and lag.
    Describe {
        /// The group.
        group: String,
    },
    /// Move a group's committed offsets (the group must have no active members).
    ResetOffsets(ResetOffsetsArgs),
}

/// `tidelog groups reset-offsets` and `tidelog share-groups reset-offsets`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("to").required(true).args(
    ["to_earliest", "to_latest", "to_offset", "to_datetime"]
)))]
pub(crate) struct ResetOffsetsArgs {
    /// The group.
    pub group: String,
    /// The topic whose offsets move.
    #[arg(long, value_name = "T")]
    pub topic: String,
    /// Only this partition (repeat for several; default: all).
    #[arg(short = 'p', long, value_name = "P")]
    pub partition: Vec<i32>,
    /// To the first offset still in the log.
    #[arg(long)]
    pub to_earliest: bool,
    /// To the end of the log.
    #[arg(long)]
    pub to_latest: bool,
    /// To this offset (clamped to the log's range).
    #[arg(long, value_name = "N")]
    pub to_offset: Option<i64>,
    /// To the first record at or after this time (ms since the epoch or an RFC
    /// 3339 date).
    #[arg(long, value_name = "D")]
    pub to_datetime: Option<String>,
    /// Print the new offsets without setting them.
    #[arg(long)]
    pub dry_run: bool,
}

/// `tidelog dump PATH [--records]`.
#[derive(Debug, Args)]
pub(crate) struct DumpArgs {
    /// A `.log`, `.index` or `.timeindex` file, a partition directory (every segment
    /// file in it, in order), or a checkpoint file (`partition.checkpoint`, `topics`,
    /// `producer-id-block`: its fields and whether its CRC is valid).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Also print every record of each batch (offset, timestamp, key, value, headers).
    #[arg(long)]
    pub records: bool,
}

/// `tidelog perf ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum PerfCmd {
    /// Append N records of S bytes, B records per append call.
    Produce(PerfProduceArgs),
    /// Read every record of every partition from offset 0.
    Consume(PerfConsumeArgs),
    /// A producer thread and a consumer thread at once; then end-to-end latency (one
    /// partition).
    Pubsub(PerfPubsubArgs),
    /// Time reopening the broker over a topic of many partitions; memory and disk used.
    Open(PerfOpenArgs),
    /// Time recovery after a writer process is killed (SIGKILL) with SIZE bytes written.
    Recover(PerfRecoverArgs),
    /// Latency of reading one record at a random offset.
    Lookup(PerfLookupArgs),
    /// Replicated writes over the network: `tidelog serve` child processes on
    /// 127.0.0.1, one node (replication factor 1) then three (replication factor 3),
    /// each driven with Produce at acks=1 and acks=all: throughput and ack latency.
    #[cfg(feature = "server")]
    Cluster(PerfClusterArgs),
    /// Many consumer groups on a cluster: `tidelog serve` child processes on 127.0.0.1
    /// (three nodes), N groups each committing an offset once a second: commit latency
    /// and the nodes' memory per group.
    #[cfg(feature = "server")]
    Groups(PerfGroupsArgs),
    /// What a consumer's fetch of many idle partitions costs the broker, without and
    /// with a fetch session (KIP-227): a `tidelog serve` child process on 127.0.0.1,
    /// full fetches then incremental ones; CPU time per fetch and the bytes each way.
    #[cfg(feature = "server")]
    Fetch(PerfFetchArgs),
    /// Store-and-forward: records written to a local topic first, then copied by a
    /// `Forwarder` to a `tidelog serve` child process on 127.0.0.1 (in transactions, or
    /// idempotent with --no-transactions); records per second until it caught up.
    #[cfg(feature = "server")]
    Forward(PerfForwardArgs),
    /// The writer process of `perf recover` (internal).
    #[command(hide = true)]
    RecoverWriter(PerfRecoverWriterArgs),
}

/// `tidelog perf produce`.
#[derive(Debug, Args)]
pub(crate) struct PerfProduceArgs {
    /// Topic (created if missing).
    #[arg(long, value_name = "T")]
    pub topic: String,
    /// Number of records.
    #[arg(long, value_name = "N")]
    pub records: u64,
    /// Value size of each record in bytes.
    #[arg(long, value_name = "S")]
    pub record_size: usize,
    /// Records per append call (1: one record per call).
    #[arg(long, value_name = "B", default_value_t = 100)]
    pub batch: usize,
    /// Partitions of the topic (default: 1 when it is created; an existing topic with
    /// another count is an error); without --keys, batches go round-robin.
    #[arg(long, value_name = "P")]
    pub partitions: Option<i32>,
    /// Number of distinct keys (0: no keys). Record i gets the 12-byte key
    /// `key-NNNNNNNN` with NNNNNNNN = i mod K, goes to the partition the default
    /// partitioner picks for that key (Kafka's murmur2), and each partition's batch is
    /// appended when it holds B records.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub keys: u64,
    /// Acknowledgement level: 0, 1 or all (one replica: 1 and all are the same).
    #[arg(long, value_name = "ACKS", default_value = "1", value_parser = ["0", "1", "all", "-1"])]
    pub acks: String,
    /// Send every record through `tidelog::Producer` (`send_async`, with its default
    /// partitioner and Kafka's batching defaults: batch.size 16 KiB, linger 5 ms) and
    /// flush at the end, instead of appending batches of B records: what an
    /// application using the producer API gets.
    #[arg(long, conflicts_with = "batch")]
    pub producer: bool,
    /// Durable single-record sends: --threads threads share the N records, each sending
    /// one record at a time through `tidelog::Producer` with `Durability::Fsync` and
    /// linger 0 and waiting for its acknowledgement (after the fsync; concurrent
    /// senders share fsyncs). Reports the acknowledgement latency (p50_us, p99_us) and
    /// the fsyncs the run made.
    #[arg(long, conflicts_with_all = ["batch", "producer", "keys"])]
    pub durable: bool,
    /// Sending threads of a --durable run.
    #[arg(long, value_name = "T", default_value_t = 1, requires = "durable")]
    pub threads: usize,
    /// Transactions: the N records go through a transactional `tidelog::Producer` in
    /// transactions of --txn-records records each (begin, send_nowait each record,
    /// commit), and N through the non-transactional `Producer` to `<topic>-plain`, in
    /// --rounds rounds whose two runs alternate in order. Reports each round, the rate,
    /// the commit latency (commit_p50_us, commit_p99_us: from the commit call until it
    /// returns, its markers written), the non-transactional rate (producer_*) and the
    /// median of the rounds' ratios (ratio_to_producer).
    #[arg(long, conflicts_with_all = ["batch", "producer", "durable", "keys"])]
    pub transactional: bool,
    /// Records per transaction of a --transactional run.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 10_000,
        requires = "transactional"
    )]
    pub txn_records: u64,
    /// Rounds of a --transactional run: each sends the N records both ways, the
    /// non-transactional run first in odd rounds, second in even ones.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 4,
        requires = "transactional"
    )]
    pub rounds: usize,
    /// Run --producer or --transactional through the network producer against a
    /// running node or cluster (HOST:PORT[,...]) instead of a data directory in this
    /// process; the topics get --partitions partitions (default 1) and the cluster's
    /// default replication factor when created.
    #[cfg(feature = "server")]
    #[arg(long, value_name = "HOSTS")]
    pub bootstrap: Option<String>,
    /// `batch.size` in bytes of a --producer run (Kafka's default 16384).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 16384,
        requires = "producer"
    )]
    pub batch_bytes: usize,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf consume`.
#[derive(Debug, Args)]
pub(crate) struct PerfConsumeArgs {
    /// Topic.
    #[arg(long, value_name = "T")]
    pub topic: String,
    /// Read through `tidelog::GroupConsumer` (a member of a new consumer group, from the
    /// earliest offsets, CRCs checked as Kafka's `check.crcs`, nothing committed) instead
    /// of reading the partitions directly: what an application using the group API gets.
    #[arg(long)]
    pub group: bool,
    /// Read through the network `tidelog::Consumer` from a running node or cluster
    /// (HOST:PORT[,...]) instead of a data directory in this process: every partition
    /// from its first offset to the end it had when the run began.
    #[cfg(feature = "server")]
    #[arg(long, value_name = "HOSTS", conflicts_with = "group")]
    pub bootstrap: Option<String>,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf cluster`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct PerfClusterArgs {
    /// Records of each throughput run.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub records: u64,
    /// Value size of each record in bytes.
    #[arg(long, value_name = "S", default_value_t = 100)]
    pub record_size: usize,
    /// Records per Produce request in the throughput runs.
    #[arg(long, value_name = "B", default_value_t = 1000)]
    pub batch: usize,
    /// Produce requests sent and not yet answered, at most, in the throughput runs
    /// (Kafka's `max.in.flight.requests.per.connection`).
    #[arg(long, value_name = "W", default_value_t = 5)]
    pub in_flight: usize,
    /// Records of each latency run (a request carries the records due when the window
    /// has room, as a producer with linger.ms 0).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub latency_records: u64,
    /// Pace of the latency runs, records per second.
    #[arg(long, value_name = "R", default_value_t = 20_000)]
    pub latency_rate: u64,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf fetch`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct PerfFetchArgs {
    /// Partitions of the topic fetched (every one listed in a full fetch, all idle).
    #[arg(long, value_name = "P", default_value_t = 1000, value_parser = clap::value_parser!(i32).range(1..=100_000))]
    pub partitions: i32,
    /// Seconds of fetches measured in each mode (sessionless, then in a session).
    #[arg(long, value_name = "S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf forward`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct PerfForwardArgs {
    /// Records written to the local topic, then forwarded.
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,
    /// Value size of each record in bytes.
    #[arg(long, value_name = "S", default_value_t = 100)]
    pub record_size: usize,
    /// Partitions of the local topic and of the remote one.
    #[arg(long, value_name = "P", default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub partitions: i32,
    /// Forward with an idempotent producer, without transactions (as `tidelog forward
    /// --no-transactions`).
    #[arg(long)]
    pub no_transactions: bool,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf groups`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct PerfGroupsArgs {
    /// Consumer groups, each committing one offset once a second.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub groups: u64,
    /// Seconds of commits measured (each group commits this many times).
    #[arg(long, value_name = "S", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Give every group one member (classic protocol: JoinGroup, SyncGroup, a heartbeat
    /// every 3 s) that commits with its generation, instead of standalone groups
    /// (generation -1, no member, as consumers that assign their partitions themselves).
    #[arg(long)]
    pub members: bool,
    /// Connections to each node; each carries the requests of its groups.
    #[arg(long, value_name = "C", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub connections: u64,
    /// Requests a connection may have sent and not yet had answered (Kafka's
    /// `max.in.flight.requests.per.connection`, default 5); a node works on a
    /// connection's OffsetCommits at once and answers them in order.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub in_flight: u64,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf pubsub`.
#[derive(Debug, Args)]
pub(crate) struct PerfPubsubArgs {
    /// Records of the throughput run.
    #[arg(long, value_name = "N")]
    pub records: u64,
    /// Value size of each record in bytes (at least 8 for the latency run).
    #[arg(long, value_name = "S")]
    pub record_size: usize,
    /// Records per append call in the throughput run.
    #[arg(long, value_name = "B", default_value_t = 100)]
    pub batch: usize,
    /// Partitions of the throughput run's topic: `perf-pubsub` for 1, `perf-pubsub-P`
    /// for more (so runs with different counts never share a topic). The consumer
    /// thread reads them all. The latency run always uses one partition.
    #[arg(long, value_name = "P", default_value_t = 1)]
    pub partitions: i32,
    /// Keys in the throughput run, as `perf produce --keys` (0: no keys, batches
    /// round-robin over the partitions).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub keys: u64,
    /// Records of the latency run.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub latency_records: u64,
    /// Pace of the latency run, records per second.
    #[arg(long, value_name = "R", default_value_t = 100_000)]
    pub latency_rate: u64,
    /// Send through `tidelog::Producer` (`send_nowait`, default partitioner; Kafka's
    /// batching defaults in the throughput run, linger 0 in the latency run) and read
    /// through a `tidelog::GroupConsumer` member, instead of appending batches of B
    /// records and reading the partitions directly: what an application gets.
    #[arg(long, conflicts_with = "batch")]
    pub producer: bool,
    /// Run --producer through the network producer and group consumer against a
    /// running node or cluster (HOST:PORT[,...]) instead of a data directory in this
    /// process; the topics are created there if missing (the cluster's default
    /// replication factor).
    #[cfg(feature = "server")]
    #[arg(long, value_name = "HOSTS", requires = "producer")]
    pub bootstrap: Option<String>,
    /// Producer threads of the throughput run (with --producer), sharing one Producer.
    #[arg(long, value_name = "T", default_value_t = 1, requires = "producer")]
    pub threads: usize,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf open`.
#[derive(Debug, Args)]
pub(crate) struct PerfOpenArgs {
    /// Topic (created with --partitions partitions and one small batch in each if
    /// missing).
    #[arg(long, value_name = "T", default_value = "perf-open")]
    pub topic: String,
    /// Partitions of the topic (default: 1000 when it is created; an existing topic
    /// with another count is an error).
    #[arg(long, value_name = "N")]
    pub partitions: Option<i32>,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Only create the topic (the child process `perf open` runs so that the setup
    /// leaves nothing in the measuring process's memory).
    #[arg(long, hide = true)]
    pub setup_only: bool,
}

/// `tidelog perf recover`.
#[derive(Debug, Args)]
pub(crate) struct PerfRecoverArgs {
    /// Topic of one partition written by the killed process (created if missing).
    #[arg(long, value_name = "T", default_value = "perf-recover")]
    pub topic: String,
    /// Bytes of batches the writer appends before it is killed: a number with an
    /// optional K, M, G suffix (powers of 1024).
    #[arg(long, value_name = "SIZE")]
    pub bytes: String,
    /// Value size of each record in bytes.
    #[arg(long, value_name = "S", default_value_t = 100)]
    pub record_size: usize,
    /// Records per append call.
    #[arg(long, value_name = "B", default_value_t = 100)]
    pub batch: usize,
    /// Seconds the writer stays alive, idle, between its last acknowledged append and
    /// the kill (time for the background flush of rolled segments to catch up).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub wait_before_kill: f64,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog perf recover-writer` (run by `perf recover`).
#[derive(Debug, Args)]
pub(crate) struct PerfRecoverWriterArgs {
    /// Topic.
    #[arg(long, value_name = "T")]
    pub topic: String,
    /// Bytes of batches to append.
    #[arg(long, value_name = "BYTES")]
    pub bytes: u64,
    /// Value size of each record in bytes.
    #[arg(long, value_name = "S")]
    pub record_size: usize,
    /// Records per append call.
    #[arg(long, value_name = "B")]
    pub batch: usize,
}

/// `tidelog perf lookup`.
#[derive(Debug, Args)]
pub(crate) struct PerfLookupArgs {
    /// Topic; offsets are drawn over all its partitions.
    #[arg(long, value_name = "T")]
    pub topic: String,
    /// Number of timed reads.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub samples: u64,
    /// Touch every page of the log once before timing, so that the reads find the
    /// pages mapped (a long-running broker's state) rather than fault them in.
    #[arg(long)]
    pub warm: bool,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// `tidelog serve --listen ADDR [--advertised HOST:PORT] ...`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// A listener, as Kafka's listeners: NAME://HOST:PORT where NAME is PLAINTEXT, SSL,
    /// SASL_PLAINTEXT, SASL_SSL or a name of --listener-security-protocol-map, or a bare
    /// HOST:PORT (PLAINTEXT); repeat for several, each with its own name. 0.0.0.0 listens
    /// on every interface.
    #[arg(
        long,
        value_name = "[NAME://]HOST:PORT",
        default_value = "127.0.0.1:9092"
    )]
    pub listen: Vec<String>,
    /// Listener names and their security protocols, e.g. INTERNAL:SASL_SSL,EXTERNAL:SSL
    /// (Kafka's listener.security.protocol.map); the four protocol names always map to
    /// themselves unless listed here.
    #[arg(long, value_name = "NAME:PROTOCOL,...")]
    pub listener_security_protocol_map: Option<String>,
    /// The server's TLS certificate chain, PEM (for SSL and SASL_SSL listeners).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The server's TLS private key, PEM (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM) on SSL listeners; the
    /// certificate's subject becomes the principal (User:CN=...,O=...).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// SASL mechanisms offered, comma-separated (Kafka's sasl.enabled.mechanisms).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    )]
    pub sasl_mechanisms: String,
    /// Enforce ACLs: anything no ACL allows is refused (see `tidelog acls`).
    #[arg(long)]
    pub authorizer: bool,
    /// Principals allowed everything with --authorizer, separated by ; (Kafka's
    /// super.users), e.g. User:admin.
    #[arg(long, value_name = "PRINCIPALS")]
    pub super_users: Vec<String>,
    /// Cluster: the listener replica fetchers use, by its name (Kafka's
    /// inter.broker.listener.name), or by its protocol when one listener has it
    /// [default: the first --listen, in plaintext].
    #[arg(long, value_name = "NAME")]
    pub inter_broker_listener: Option<String>,
    /// Cluster: take follower fetches that carry no broker epoch (from nodes of a
    /// version before broker epochs), which cannot be checked against the follower's
    /// registration; only while a rolling upgrade from such a version is under way.
    #[arg(long, requires = "quorum")]
    pub follower_fetch_without_epoch: bool,
    /// Cluster: this broker's rack (Kafka's broker.rack): new topics spread their
    /// replicas over racks, and consumers of this rack may read from replicas here.
    #[arg(long, value_name = "RACK", requires = "quorum")]
    pub rack: Option<String>,
    /// Cluster: which replica consumers fetch from (Kafka's replica.selector.class):
    /// org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer with a
    /// client.rack to an in-sync replica of its rack [default: the leader,
    /// org.apache.kafka.common.replica.LeaderSelector].
    #[arg(long, value_name = "CLASS", requires = "quorum")]
    pub replica_selector_class: Option<String>,
    /// Cluster: the replica fetchers' SASL mechanism on a SASL inter-broker listener.
    #[arg(long, value_name = "MECHANISM")]
    pub inter_broker_sasl_mechanism: Option<String>,
    /// Cluster: the replica fetchers' SASL user (a super user, or one with
    /// ClusterAction on the cluster); the password comes from the
    /// TIDELOG_INTER_BROKER_SASL_PASSWORD environment variable.
    #[arg(long, value_name = "USER")]
    pub inter_broker_sasl_username: Option<String>,
    /// Cluster: PEM file of the CA of the nodes' certificates, for a TLS inter-broker
    /// listener.
    #[arg(long, value_name = "FILE")]
    pub inter_broker_ssl_ca_location: Option<std::path::PathBuf>,
    /// Cluster: PEM certificate the replica fetchers present on a TLS inter-broker
    /// listener that requires client certificates; its subject is their principal
    /// [default: --tls-cert, as Kafka brokers use their keystore].
    #[arg(long, value_name = "FILE", requires = "inter_broker_ssl_key_location")]
    pub inter_broker_ssl_certificate_location: Option<std::path::PathBuf>,
    /// Cluster: PEM private key of --inter-broker-ssl-certificate-location [default:
    /// --tls-key].
    #[arg(
        long,
        value_name = "FILE",
        requires = "inter_broker_ssl_certificate_location"
    )]
    pub inter_broker_ssl_key_location: Option<std::path::PathBuf>,
    /// Addresses clients are told to connect to, when the listen addresses are not
    /// reachable from them (Kafka's advertised.listeners): NAME://HOST:PORT per listener
    /// name, comma-separated or repeated; a bare HOST:PORT is the first listener's. Each
    /// client is answered with the addresses of the listener it connected on. Default:
    /// each listener's bound address (a 0.0.0.0 one: the address the client reached, or
    /// the node's quorum host in a cluster).
    #[arg(long, value_name = "[NAME://]HOST:PORT")]
    pub advertised: Vec<String>,
    /// Most client connections served at once; more are refused and logged. Lowered,
    /// with a warning, to what the open-files limit holds.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Most client connections served at once from one address (Kafka's
    /// max.connections.per.ip); one more is closed as soon as it is accepted, and
    /// logged. Default: no limit.
    #[arg(long, value_name = "N")]
    pub max_connections_per_ip: Option<usize>,
    /// Limits of given addresses instead of --max-connections-per-ip (Kafka's
    /// max.connections.per.ip.overrides): HOST:LIMIT pairs, comma-separated, a host an IP
    /// address (IPv6 in brackets) or a host name, resolved at start to every address it
    /// has ("127.0.0.1:100,[::1]:0,localhost:5").
    #[arg(long, value_name = "HOST:N,...", default_value = "")]
    pub max_connections_per_ip_overrides: String,
    /// Largest request accepted, in bytes (Kafka's socket.request.max.bytes).
    #[arg(long, value_name = "BYTES", default_value_t = 100 * 1024 * 1024)]
    pub max_request_size: usize,
    /// Do not create unknown topics when a client asks for their metadata.
    #[arg(long)]
    pub no_auto_create_topics: bool,
    /// Partitions of a topic created without a count: auto-created topics and
    /// CreateTopics with -1 (Kafka's num.partitions).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..))]
    pub num_partitions: i32,
    /// Partitions the broker holds at most, over all topics: a CreateTopics or
    /// CreatePartitions past it is refused whole (INVALID_PARTITIONS). Default: what the
    /// process can hold (from the kernel's vm.max_map_count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_partitions: Option<u64>,
    /// More log directories for partitions besides the data directory (Kafka's
    /// log.dirs past its first entry, JBOD): DIR1,DIR2 or the option repeated. The data
    /// directory keeps the metadata files; a new partition goes to the directory holding
    /// the fewest; a directory that fails takes only its partitions offline
    /// (KAFKA_STORAGE_ERROR). Give the same list at every start.
    #[arg(long, value_name = "DIR,...", value_delimiter = ',')]
    pub log_dirs: Vec<PathBuf>,
    /// The bytes per second a move between log directories (`tidelog log-dirs move`,
    /// AlterReplicaLogDirs) copies at most (Kafka's
    /// replica.alter.log.dirs.io.max.bytes.per.second); unlimited when left out.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub replica_alter_log_dirs_io_max_bytes_per_second: Option<u64>,
    /// How often the segments past a topic's retention.ms or retention.bytes are
    /// deleted (and compacted topics cleaned), in ms (Kafka's
    /// log.retention.check.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub log_retention_check_interval_ms: u64,
    /// The default of the durable.acks topic setting (log.durable.acks): an acks=all
    /// write is answered only once the leader and every in-sync replica have fsynced it.
    /// A topic's own durable.acks overrides it. Set it alike on every node of a cluster.
    #[arg(long)]
    pub log_durable_acks: bool,
    /// Run as node N of a cluster (Kafka's node.id); needs --quorum.
    #[arg(long, value_name = "N", requires = "quorum")]
    pub node_id: Option<i32>,
    /// Every voter of the cluster with its quorum address, e.g.
    /// 1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293 (Kafka's
    /// controller.quorum.voters); this node listens for its peers on its own entry.
    #[arg(long, value_name = "ID@HOST:PORT,...", requires = "node_id")]
    pub quorum: Option<String>,
    /// Cluster: the quorum port's security protocol, PLAINTEXT or SSL (Kafka's
    /// listener.security.protocol.map for the controller listener). SSL is mutual TLS:
    /// --tls-cert/--tls-key are this node's certificate as server and as client, and the
    /// peers' must be signed by --quorum-ssl-ca-location and name the host of their
    /// --quorum address [default: PLAINTEXT].
    #[arg(long, value_name = "PROTOCOL", requires = "quorum")]
    pub quorum_security_protocol: Option<String>,
    /// Cluster: PEM file of the CA that signed the nodes' certificates, for
    /// --quorum-security-protocol SSL.
    #[arg(long, value_name = "FILE", requires = "quorum")]
    pub quorum_ssl_ca_location: Option<PathBuf>,
    /// Cluster: fence a broker the controller has not heard from for this long (Kafka's
    /// broker.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 9000)]
    pub broker_session_timeout_ms: u64,
    /// Cluster: replicas of a topic created without a replication factor (Kafka's
    /// default.replication.factor).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub default_replication_factor: i16,
    /// Cluster: fewest in-sync replicas for an acks=all produce (Kafka's
    /// min.insync.replicas).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_insync_replicas: i32,
    /// Cluster: a follower not caught up for this long leaves the ISR (Kafka's
    /// replica.lag.time.max.ms).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub replica_lag_time_max_ms: u64,
    /// Cluster: replicas of __consumer_offsets, capped at the number of nodes (Kafka's
    /// offsets.topic.replication.factor).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub offsets_topic_replication_factor: i16,
    /// Partitions of __consumer_offsets when it is created, over which groups (and so
    /// their coordinators) are spread by their id's hash (Kafka's
    /// offsets.topic.num.partitions). An existing topic keeps its count.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(i32).range(1..))]
    pub offsets_topic_num_partitions: i32,
    /// How long the first rebalance of a new group of network clients waits for more
    /// members, in ms; each member joining meanwhile extends the wait (Kafka's
    /// group.initial.rebalance.delay.ms).
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    pub group_initial_rebalance_delay_ms: u64,
    /// How long a member of a consumer-protocol group (KIP-848) stays without a
    /// heartbeat before it is removed, in ms, within the two bounds below (Kafka's
    /// group.consumer.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 45_000)]
    pub group_consumer_session_timeout_ms: u64,
    /// How often members of a consumer-protocol group are told to heartbeat, in ms,
    /// within the bounds below and below the session timeout (Kafka's
    /// group.consumer.heartbeat.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub group_consumer_heartbeat_interval_ms: u64,
    /// Smallest consumer.session.timeout.ms a consumer-protocol group's config may set, in
    /// ms (Kafka's group.consumer.min.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 45_000)]
    pub group_consumer_min_session_timeout_ms: u64,
    /// Largest consumer.session.timeout.ms a consumer-protocol group's config may set, in
    /// ms (Kafka's group.consumer.max.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub group_consumer_max_session_timeout_ms: u64,
    /// Smallest consumer.heartbeat.interval.ms a consumer-protocol group's config may set,
    /// in ms (Kafka's group.consumer.min.heartbeat.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub group_consumer_min_heartbeat_interval_ms: u64,
    /// Largest consumer.heartbeat.interval.ms a consumer-protocol group's config may set,
    /// in ms (Kafka's group.consumer.max.heartbeat.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub group_consumer_max_heartbeat_interval_ms: u64,
    /// How long a share group member stays without a heartbeat before it is removed and
    /// its records released, in ms, within the bounds below (Kafka's
    /// group.share.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 45_000)]
    pub group_share_session_timeout_ms: u64,
    /// How often share group members are told to heartbeat, in ms, within the bounds
    /// below and below the session timeout (Kafka's group.share.heartbeat.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub group_share_heartbeat_interval_ms: u64,
    /// How long a share group member holds a record it acquired, in ms, within the
    /// bounds below (Kafka's group.share.record.lock.duration.ms).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub group_share_record_lock_duration_ms: u64,
    /// Smallest share.session.timeout.ms a share group's config may set, in ms (Kafka's
    /// group.share.min.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 45_000)]
    pub group_share_min_session_timeout_ms: u64,
    /// Largest share.session.timeout.ms a share group's config may set, in ms (Kafka's
    /// group.share.max.session.timeout.ms).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub group_share_max_session_timeout_ms: u64,
    /// Smallest share.heartbeat.interval.ms a share group's config may set, in ms (Kafka's
    /// group.share.min.heartbeat.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub group_share_min_heartbeat_interval_ms: u64,
    /// Largest share.heartbeat.interval.ms a share group's config may set, in ms (Kafka's
    /// group.share.max.heartbeat.interval.ms).
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub group_share_max_heartbeat_interval_ms: u64,
    /// Smallest share.record.lock.duration.ms a share group's config may set, in ms
    /// (Kafka's group.share.min.record.lock.duration.ms).
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub group_share_min_record_lock_duration_ms: u64,
    /// Largest share.record.lock.duration.ms a share group's config may set, in ms (Kafka's
    /// group.share.max.record.lock.duration.ms).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub group_share_max_record_lock_duration_ms: u64,
    /// How many times a share group delivers a record at most: released or timed out
    /// at this count, it is archived instead of delivered again (Kafka's
    /// group.share.delivery.count.limit, 2 to 10).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u16).range(2..=10))]
    pub group_share_delivery_count_limit: u16,
    /// Most records of one share-partition in flight at once (acquired, or released
    /// and not yet acquired again): a ShareFetch acquires no more than leaves room for
    /// (Kafka's group.share.partition.max.record.locks, 100 to 10000).
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = clap::value_parser!(u16).range(100..=10_000))]
    pub group_share_partition_max_record_locks: u16,
    /// Most members of one share group: a member joining a full group is refused with
    /// GROUP_MAX_SIZE_REACHED (Kafka's group.share.max.size).
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub group_share_max_size: u64,
    /// Most share sessions (ShareFetch/ShareAcknowledge of network members) this node
    /// holds: a new one beyond them is refused with SHARE_SESSION_LIMIT_REACHED (Kafka's
    /// group.share.max.share.sessions).
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub group_share_max_share_sessions: u64,
    /// Cluster: move leaderships back to the preferred replicas when they are
    /// imbalanced (Kafka's auto.leader.rebalance.enable).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_leader_rebalance_enable: bool,
    /// Cluster: how often the controller checks the leaders' balance, in seconds (Kafka's
    /// leader.imbalance.check.interval.seconds).
    #[arg(long, value_name = "S", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub leader_imbalance_check_interval_seconds: u64,
    /// Cluster: rebalance a broker's leaderships when more than this percentage of the
    /// partitions it prefers to lead are led elsewhere (Kafka's
    /// leader.imbalance.per.broker.percentage).
    #[arg(long, value_name = "PCT", default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub leader_imbalance_per_broker_percentage: u32,
    /// The longest a Fetch waits for data, in ms: a client's max_wait_ms above it is
    /// capped to it.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub fetch_max_wait_ms: u64,
    /// The most record bytes one Fetch response carries, in bytes (Kafka's broker
    /// fetch.max.bytes, at least 1024): a consumer's max_bytes above it is capped to it.
    #[arg(long, value_name = "BYTES", default_value_t = 55 * 1024 * 1024, value_parser = clap::value_parser!(u32).range(1024..=i32::MAX as i64))]
    pub fetch_max_bytes: u32,
    /// Memory for requests in flight over all connections, in bytes (Kafka's
    /// queued.max.request.bytes): past it, connections wait before reading more.
    #[arg(long, value_name = "BYTES", default_value_t = 500 * 1024 * 1024)]
    pub max_queued_request_bytes: usize,
    /// The most partitions one DescribeTopicPartitions answer carries, whatever the
    /// admin client asks; it pages through the rest (Kafka's
    /// max.request.partition.size.limit).
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub max_request_partition_size_limit: u32,
    /// Serve the broker's metrics in the Prometheus text format at
    /// http://HOST:PORT/metrics, e.g. 127.0.0.1:9644 (port 0 picks a free port; the
    /// address is printed at start).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
}
