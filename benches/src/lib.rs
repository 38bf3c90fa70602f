//! queuey's benchmarks live in `benches/`; this library is empty. See
//! `BENCHMARKS.md` at the workspace root for how to run them and what they
//! measured.
