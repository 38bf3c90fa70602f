//! The public API of the queuey crates, as text a reviewer reads: one file
//! per crate in `snapshots/`, each public item on a line. The test in
//! `tests/snapshot.rs` builds every crate's rustdoc JSON and fails when its
//! public items differ from the file, showing what was added and removed.
//!
//! After a change to the API that is meant, write the files anew and commit
//! them with the change:
//!
//! ```sh
//! UPDATE_API_SNAPSHOTS=1 cargo test -p queuey-api-snapshot
//! ```
