//! Each layer alone around a mock service, then composed with each other
//! and with tower's own middleware.

#[path = "../support/mod.rs"]
mod support;

mod compose;
mod dead_letter;
mod deadline;
mod defer;
mod observe;
mod retry;
