//! A broker's refusal of one request of the network client ([`Cluster`](crate::Cluster)):
//! which API and version, which broker, which topic or partition, and Kafka's code.

use super::admin::{ErrorCode, Resource};

/// A broker answered a request of the network client with a Kafka error code: the API
/// and version asked (`Produce v9`), the broker's address, the topic or partition the
/// code is about and the broker's message when it sent one. Reaches callers as
/// [`Error::Api`](crate::Error::Api).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The API and version of the request, as `Produce v9`.
    pub api: String,
    /// The broker's `host:port`.
    pub broker: String,
    /// The topic, partition or group the code is about.
    pub resource: Resource,
    /// Kafka's error code.
    pub code: ErrorCode,
    /// The broker's explanation, if it gave one.
    pub message: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} to {}: {}: {}",
            self.api, self.broker, self.resource, self.code
        )?;
        if let Some(m) = self.message.as_deref().filter(|m| !m.trim().is_empty()) {
            write!(f, " ({m})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

impl From<ApiError> for crate::error::Error {
    fn from(e: ApiError) -> crate::error::Error {
        crate::error::Error::Api(Box::new(e))
    }
}

/// Kafka's name of an API key (`Produce` for 0), or `api key N` for one Kafka does not
/// define.
pub(crate) fn api_name(api_key: i16) -> String {
    match kafka_protocol::messages::ApiKey::try_from(api_key) {
        Ok(k) => format!("{k:?}"),
        Err(()) => format!("api key {api_key}"),
    }
}
