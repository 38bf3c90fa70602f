//! `Producer` and `Delivery` driven through `MemoryBackend`, row by row of
//! the semantics table in the design, with tokio's paused clock.

mod delivery;
mod holds;
mod job_id;
mod producer;
mod semantics;
mod support;
