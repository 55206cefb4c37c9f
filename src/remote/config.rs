//! [`ClientConfig`]: the settings of a [`Cluster`](super::Cluster) connection, by Kafka's
//! client setting names, checked when the cluster is connected.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::admin::{AdminClient, AdminClientBuilder};
use crate::error::{Error, Result};
use crate::security::{SaslMechanism, SecurityProtocol};

/// The settings this client reads, with what each one is; any other key is refused
/// when the cluster is connected (a misspelt setting is an error, not a silent default).
pub const SETTINGS: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "HOST:PORT[,HOST:PORT...]: the brokers asked first for the cluster's metadata",
    ),
    (
        "client.id",
        "the id sent with every request (default tidelog)",
    ),
    (
        "request.timeout.ms",
        "how long one request may wait for its answer, and how long an operation retries (default 30000)",
    ),
    (
        "retry.backoff.ms",
        "the pause before the first repetition of a failed request (default 100); it doubles with each one",
    ),
    (
        "delivery.timeout.ms",
        "how long a partition request (a batch, a fetch) is retried in all before it fails (default 120000)",
    ),
    (
        "retry.backoff.max.ms",
        "the longest pause between two repetitions (default 1000)",
    ),
    (
        "retries",
        "how many times the admin calls repeat a request (default 10)",
    ),
    (
        "socket.connection.setup.timeout.ms",
        "how long a connection may take to open (default 10000)",
    ),
    (
        "metadata.max.age.ms",
        "the age after which metadata is asked again even without an error (default 300000)",
    ),
    (
        "security.protocol",
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default PLAINTEXT)",
    ),
    (
        "ssl.ca.location",
        "PEM file of the CA that signed the brokers' certificates",
    ),
    (
        "ssl.certificate.location",
        "PEM file of this client's certificate (mutual TLS)",
    ),
    (
        "ssl.key.location",
        "PEM file of the private key of ssl.certificate.location",
    ),
    (
        "sasl.mechanism",
        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (librdkafka's sasl.mechanisms too)",
    ),
    ("sasl.username", "the SASL user name"),
    ("sasl.password", "the SASL password"),
];

/// The settings of a connection to a Kafka-API cluster (tidelog, Apache Kafka, Redpanda,
/// a managed service), by Kafka's client setting names; [`SETTINGS`] lists them.
///
/// ```
/// use tidelog::ClientConfig;
/// let config = ClientConfig::new("kafka-1:9092,kafka-2:9092")
///     .set("client.id", "billing")
///     .set("request.timeout.ms", 10_000);
/// assert_eq!(config.get("bootstrap.servers"), Some("kafka-1:9092,kafka-2:9092"));
/// assert_eq!(config.get("client.id"), Some("billing"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    settings: BTreeMap<String, String>,
}

/// The settings parsed: the admin client's (which the connection shares) and the
/// cluster connection's own.
#[derive(Debug)]
pub(super) struct Parsed {
    pub admin: AdminClientBuilder,
    pub connect_timeout: Duration,
    pub retry_backoff_max: Duration,
    pub metadata_max_age: Duration,
    pub delivery_timeout: Duration,
}

fn invalid(key: &str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        key: key.into(),
        reason: reason.into(),
    }
}

fn millis(key: &str, value: &str) -> Result<Duration> {
    value
        .trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| invalid(key, format!("{value:?} is not a number of milliseconds")))
}

impl ClientConfig {
    /// Settings with `bootstrap.servers` set to `bootstrap` (`host:port`, or several
    /// separated by commas) and the others at their defaults.
    pub fn new(bootstrap: impl Into<String>) -> ClientConfig {
        ClientConfig {
            settings: BTreeMap::from([("bootstrap.servers".to_string(), bootstrap.into())]),
        }
    }

    /// Sets the setting `key` (a Kafka client setting name: see [`SETTINGS`]); the value
    /// is checked when the cluster is connected.
    #[must_use]
    pub fn set(mut self, key: &str, value: impl ToString) -> ClientConfig {
        self.settings.insert(key.to_string(), value.to_string());
        self
    }

    /// The value of the setting `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(String::as_str)
    }

    /// Checks every setting and builds the admin client's settings from them.
    pub(super) fn parse(&self) -> Result<Parsed> {
        let bootstrap = self.get("bootstrap.servers").unwrap_or_default();
        let mut admin = AdminClient::builder(bootstrap).client_id("tidelog");
        let mut parsed_connect = Duration::from_secs(10);
        let mut backoff_max = Duration::from_secs(1);
        let mut max_age = Duration::from_secs(300);
        let mut retry_backoff = Duration::from_millis(100);
        let mut delivery = Duration::from_secs(120);
        for (key, value) in &self.settings {
            let key = key.as_str();
            admin = match key {
                "bootstrap.servers" => admin,
                "client.id" => admin.client_id(value.clone()),
                "request.timeout.ms" => match millis(key, value)? {
                    d if d.is_zero() => return Err(invalid(key, "must be above 0")),
                    d => admin.request_timeout(d),
                },
                "retry.backoff.ms" => {
                    retry_backoff = millis(key, value)?;
                    admin.retry_backoff(retry_backoff)
                }
                "retries" => admin.retries(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| invalid(key, format!("{value:?} is not a count")))?,
                ),
                "retry.backoff.max.ms" => {
                    backoff_max = millis(key, value)?;
                    admin
                }
                "socket.connection.setup.timeout.ms" => {
                    parsed_connect = millis(key, value)?;
                    if parsed_connect.is_zero() {
                        return Err(invalid(key, "must be above 0"));
                    }
                    admin
                }
                "delivery.timeout.ms" => {
                    delivery = millis(key, value)?;
                    admin
                }
                "metadata.max.age.ms" => {
                    max_age = millis(key, value)?;
                    admin
                }
                "security.protocol" => {
                    let protocol: SecurityProtocol = value.parse().map_err(|e| match e {
                        Error::InvalidConfig { reason, .. } => invalid(key, reason),
                        other => other,
                    })?;
                    admin.security_protocol(protocol)
                }
                "ssl.ca.location" => admin.ssl_ca_location(value),
                "ssl.certificate.location" => admin.ssl_certificate_location(value),
                "ssl.key.location" => admin.ssl_key_location(value),
                "sasl.mechanism" | "sasl.mechanisms" => {
                    let m = SaslMechanism::from_name(&value.trim().to_ascii_uppercase())
                        .ok_or_else(|| {
                            invalid(
                                key,
                                format!("{value:?}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                            )
                        })?;
                    admin.sasl_mechanism(m)
                }
                "sasl.username" => admin.sasl_username(value.clone()),
                "sasl.password" => admin.sasl_password(value.clone()),
                _ => {
                    return Err(invalid(
                        key,
                        "not a setting of the network client (see tidelog::remote::SETTINGS)",
                    ));
                }
            };
        }
        if backoff_max < retry_backoff {
            return Err(invalid(
                "retry.backoff.max.ms",
                format!("{backoff_max:?} is below retry.backoff.ms ({retry_backoff:?})"),
            ));
        }
        Ok(Parsed {
            admin,
            connect_timeout: parsed_connect,
            retry_backoff_max: backoff_max,
            metadata_max_age: max_age,
            delivery_timeout: delivery,
        })
    }
}
