//! The vocabulary of authorization (Kafka's ACL resource types, pattern types,
//! operations and permissions): what [`Error::AuthorizationFailed`](super::Error) names,
//! and what the ACLs of the `security` layer are made of. Their `i8` codes are Kafka's,
//! used by the wire protocol and the ACL files.

use std::fmt;
use std::str::FromStr;

use super::{Error, Result};

macro_rules! kafka_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $code:literal, $text:literal;)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Kafka's numeric code on the wire.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)+
                }
            }

            /// The value of Kafka's numeric code, if it names one.
            pub fn from_code(code: i8) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Kafka's name (as `kafka-acls` prints it).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            /// Kafka's name, case and `_`/`-` insensitive (`IdempotentWrite`,
            /// `idempotent-write` and `IDEMPOTENT_WRITE` are the same).
            fn from_str(s: &str) -> Result<Self> {
                let norm = |t: &str| t.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_ascii_lowercase();
                let want = norm(s);
                [$($name::$variant,)+]
                    .into_iter()
                    .find(|v| norm(v.name()) == want)
                    .ok_or_else(|| Error::InvalidConfig {
                        key: stringify!($name).into(),
                        reason: format!(
                            "{s:?} is not one of {}",
                            [$($text,)+].join(", ")
                        ),
                    })
            }
        }
    };
}

kafka_enum! {
    /// The type of a resource an ACL protects (Kafka's `ResourceType`).
    ResourceType {
        /// Matches any type (filters only).
        Any = 1, "Any";
        /// A topic.
        Topic = 2, "Topic";
        /// A consumer group.
        Group = 3, "Group";
        /// The cluster (its name is always `kafka-cluster`).
        Cluster = 4, "Cluster";
        /// A transactional id.
        TransactionalId = 5, "TransactionalId";
        /// A delegation token (named for compatibility; tidelog has none).
        DelegationToken = 6, "DelegationToken";
        /// A user (for quotas and tokens; named for compatibility).
        User = 7, "User";
    }
}

kafka_enum! {
    /// How a binding's resource name is matched (Kafka's `PatternType`).
    PatternType {
        /// Any pattern type (filters only).
        Any = 1, "Any";
        /// The bindings that match a resource name: literal, wildcard or prefix (filters only).
        Match = 2, "Match";
        /// The name exactly, or `*` for every resource of the type.
        Literal = 3, "Literal";
        /// Every resource whose name starts with the binding's name.
        Prefixed = 4, "Prefixed";
    }
}

kafka_enum! {
    /// An operation on a resource (Kafka's `AclOperation`).
    AclOperation {
        /// Any operation (filters only).
        Any = 1, "Any";
        /// Every operation.
        All = 2, "All";
        /// Read a topic (Fetch, ListOffsets, OffsetFetch) or use a group.
        Read = 3, "Read";
        /// Produce to a topic.
        Write = 4, "Write";
        /// Create topics.
        Create = 5, "Create";
        /// Delete topics, records, groups.
        Delete = 6, "Delete";
        /// Alter a resource (ACLs and credentials on the cluster, partitions of a topic).
        Alter = 7, "Alter";
        /// See a resource (Metadata lists only the topics a principal may describe).
        Describe = 8, "Describe";
        /// Inter-broker requests (a follower's Fetch).
        ClusterAction = 9, "ClusterAction";
        /// Read configurations.
        DescribeConfigs = 10, "DescribeConfigs";
        /// Change configurations.
        AlterConfigs = 11, "AlterConfigs";
        /// Produce as an idempotent producer (InitProducerId).
        IdempotentWrite = 12, "IdempotentWrite";
        /// Create delegation tokens (named for compatibility).
        CreateTokens = 13, "CreateTokens";
        /// Describe delegation tokens (named for compatibility).
        DescribeTokens = 14, "DescribeTokens";
    }
}

kafka_enum! {
    /// Whether a binding allows or denies (Kafka's `AclPermissionType`).
    AclPermission {
        /// Either (filters only).
        Any = 1, "Any";
        /// Refuses the operation; beats every ALLOW.
        Deny = 2, "Deny";
        /// Allows the operation.
        Allow = 3, "Allow";
    }
}
