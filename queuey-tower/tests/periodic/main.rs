//! Periodic jobs on the memory backend, on tokio's paused clock: each tick
//! once, never early, with its deterministic id; leaders taking over; the
//! missed-tick policies; daylight-saving transitions.

mod fleet;
mod missed;
mod support;
mod ticks;
mod worker;
