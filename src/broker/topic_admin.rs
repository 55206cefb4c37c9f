//! [`TopicAdmin`]: the topic admin calls a program makes on either handle, a
//! [`Broker`] data directory in process or a [`Cluster`](crate::Cluster) over the
//! network, so that one generic function serves both.

use super::Broker;
use crate::config::TopicConfig;
use crate::error::Result;
use crate::topic::TopicDescription;

/// The topic admin calls of [`Broker`] and [`Cluster`](crate::Cluster), with the same
/// names, arguments, results and errors on both (each handle also has them as its own
/// methods, so code on one handle needs no import):
///
/// ```
/// use tidelog::{TopicAdmin, TopicConfig};
///
/// fn setup(log: &impl TopicAdmin) -> tidelog::Result<usize> {
///     log.create_topic_if_missing("events", 3, TopicConfig::new())?;
///     Ok(log.describe_topic("events")?.partitions.len())
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// let broker = tidelog::Broker::open(dir.path())?;
/// assert_eq!(setup(&broker)?, 3);
/// # Ok::<(), tidelog::Error>(())
/// ```
pub trait TopicAdmin {
    /// Creates `name` with `partitions` partitions and the overrides of `config`.
    ///
    /// # Errors
    /// `TopicExists`, `InvalidTopicName`, `InvalidConfig`; over the network a broker's
    /// other refusals as `Admin` and the connection's errors.
    fn create_topic(&self, name: &str, partitions: i32, config: TopicConfig) -> Result<()>;

    /// Creates `name` unless it exists; an existing topic must have `partitions`
    /// partitions (`InvalidConfig` for key `partitions` naming both counts otherwise),
    /// its settings are left as they are.
    ///
    /// # Errors
    /// As [`create_topic`](Self::create_topic), except `TopicExists`.
    fn create_topic_if_missing(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<()>;

    /// The names of every topic, sorted (internal ones included).
    ///
    /// # Errors
    /// `Closed` for a closed broker; over the network the connection's errors.
    fn topics(&self) -> Result<Vec<String>>;

    /// Partitions, offsets, leaders and settings of `name` (never creates it).
    ///
    /// # Errors
    /// `UnknownTopic` when there is no such topic.
    fn describe_topic(&self, name: &str) -> Result<TopicDescription>;

    /// Deletes `name` and its data.
    ///
    /// # Errors
    /// `UnknownTopic` when there is no such topic; `InvalidConfig` for an internal one.
    fn delete_topic(&self, name: &str) -> Result<()>;

    /// Grows `name` to `total` partitions.
    ///
    /// # Errors
    /// `UnknownTopic`; an error for a count that is not a growth.
    fn add_partitions(&self, name: &str, total: i32) -> Result<()>;
}

/// `impl TopicAdmin for $handle`, each call its inherent method of the same name and
/// signature (the handles keep those, so that code on one handle needs no import).
macro_rules! topic_admin_by_inherent_methods {
    ($handle:ty) => {
        impl $crate::broker::TopicAdmin for $handle {
            fn create_topic(
                &self,
                name: &str,
                partitions: i32,
                config: $crate::TopicConfig,
            ) -> $crate::Result<()> {
                <$handle>::create_topic(self, name, partitions, config)
            }

            fn create_topic_if_missing(
                &self,
                name: &str,
                partitions: i32,
                config: $crate::TopicConfig,
            ) -> $crate::Result<()> {
                <$handle>::create_topic_if_missing(self, name, partitions, config)
            }

            fn topics(&self) -> $crate::Result<Vec<String>> {
                <$handle>::topics(self)
            }

            fn describe_topic(&self, name: &str) -> $crate::Result<$crate::TopicDescription> {
                <$handle>::describe_topic(self, name)
            }

            fn delete_topic(&self, name: &str) -> $crate::Result<()> {
                <$handle>::delete_topic(self, name)
            }

            fn add_partitions(&self, name: &str, total: i32) -> $crate::Result<()> {
                <$handle>::add_partitions(self, name, total)
            }
        }
    };
}
#[cfg(feature = "client")]
pub(crate) use topic_admin_by_inherent_methods;

topic_admin_by_inherent_methods!(Broker);
