//! What can go wrong opening a Redis store.

/// A Redis store that could not be opened. Messages never hold the URL's
/// password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisStoreError {
    /// The URL is not one Redis takes (`redis://`, `rediss://`,
    /// `redis+unix://`), or asks for what this build cannot do (`rediss://`
    /// without the `rustls` feature; TLS certificates with a plaintext
    /// URL).
    #[error("{url} is not a Redis URL: {reason}")]
    InvalidUrl {
        /// The URL, its password masked.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Redis did not answer at the URL.
    #[error("could not connect to Redis at {url}: {reason}")]
    Connect {
        /// The URL, its password masked.
        url: String,
        /// What the connection attempt answered.
        reason: String,
    },
}
