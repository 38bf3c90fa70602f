//! What can go wrong reading the management API. No message quotes a
//! password.

use std::fmt;

use super::endpoint::EndpointError;

/// Why the management API could not be read. Its messages quote no
/// password.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// No endpoint follows from the AMQP address and the management URL
    /// given.
    Endpoint(EndpointError),
    /// The HTTP client cannot be set up: a certificate file that cannot be
    /// used, or an `https://` API in a build without the `rustls` feature.
    Setup(String),
    /// Nothing answered at the base URL, or not in time.
    Unreachable {
        /// The base URL, without credentials.
        base: String,
        /// What the HTTP client reported.
        detail: String,
    },
    /// The API answered with an error status.
    Status {
        /// The base URL, without credentials.
        base: String,
        /// The HTTP status.
        status: u16,
        /// The path asked for, `/api/…`.
        path: String,
        /// The start of the answer (at most 200 characters), and how often
        /// the request was made when it was made more than once.
        body: String,
    },
    /// What answered is not the management API, or not the answer
    /// expected.
    Unexpected {
        /// The base URL, without credentials.
        base: String,
        /// The path asked for, `/api/…`.
        path: String,
        /// What is wrong with the answer.
        detail: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Endpoint(why) => why.fmt(f),
            Error::Setup(why) => f.write_str(why),
            Error::Unreachable { base, detail } => write!(
                f,
                "the management API at {base} cannot be reached ({detail}): enable the \
                 rabbitmq_management plugin, or give the API's address"
            ),
            Error::Status {
                base,
                status: 401,
                path,
                ..
            } => write!(
                f,
                "the management API at {base} refused the credentials (401) for {path}: the \
                 user needs a management tag such as `monitoring`, or give another user in the \
                 management URL"
            ),
            Error::Status {
                base,
                status,
                path,
                body,
            } => write!(
                f,
                "the management API at {base} answered {status} for {path}: {body}"
            ),
            Error::Unexpected { base, path, detail } => write!(
                f,
                "what answers {path} at {base} is not the management API: {detail}"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Endpoint(why) => Some(why),
            _ => None,
        }
    }
}

impl From<EndpointError> for Error {
    fn from(why: EndpointError) -> Self {
        Error::Endpoint(why)
    }
}
