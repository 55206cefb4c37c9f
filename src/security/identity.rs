//! What a client presents to a broker's listener: a SASL login, and the certificate
//! chain and key of mutual TLS. The client connects with them; the server's
//! inter-broker settings and the admin commands hold them.

use std::path::Path;

use super::sasl::SaslMechanism;

/// A SASL user and password (the password is never printed).
#[derive(Clone)]
pub(crate) struct SaslLogin {
    /// The mechanism.
    pub(crate) mechanism: SaslMechanism,
    /// The user name.
    pub(crate) username: String,
    /// The password.
    pub(crate) password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The certificate chain and private key (PEM files) a client presents on TLS listeners
/// (Kafka's `ssl.certificate.location` and `ssl.key.location`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientIdentity<'a> {
    /// The certificate chain, leaf first.
    pub(crate) cert: &'a Path,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub(crate) key: &'a Path,
}
