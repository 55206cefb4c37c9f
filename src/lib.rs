//! tidelog: an embeddable, Kafka-compatible commit log.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;

pub use error::{Error, Result};
