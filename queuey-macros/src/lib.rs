//! Derive macros for [queuey]: `#[derive(Queues)]` and `#[derive(Job)]`.
//!
//! Use them through the `queuey` facade (`use queuey::prelude::*;`) or
//! through `queuey-core`; the generated code finds whichever of the two the
//! crate depends on. Every setting is checked at compile time against the
//! rules the core's constructors and `QueueConfig::validate` enforce, so a
//! derived queue set or job never fails or panics at run time: a bad value is
//! a compile error pointing at it.
//!
//! # `#[derive(Queues)]`
//!
//! On a fieldless enum, one variant per queue. Implements `Queues`: `ALL`
//! lists the variants in declaration order, `name()` returns the full queue
//! name and `config()` a `QueueConfig` with the settings given (everything
//! left out keeps `QueueConfig::new`'s default).
//!
//! ```
//! use std::time::Duration;
//! use queuey_core::{Backoff, QueueConfig, Queues, RetryPolicy};
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! #[queues(prefix = "myapp")]
//! enum AppQueues {
//!     #[queue(
//!         name = "mail",
//!         prefetch = 32,
//!         durable = true,
//!         message_ttl = "30s",
//!         max_priority = 5,
//!         retry(max_attempts = 3, backoff = "fixed", delay = "10s"),
//!     )]
//!     Emails,
//!     WebhookCalls,
//! }
//!
//! assert_eq!(AppQueues::ALL, &[AppQueues::Emails, AppQueues::WebhookCalls]);
//! assert_eq!(AppQueues::Emails.name(), "myapp.mail");
//! assert_eq!(AppQueues::WebhookCalls.name(), "myapp.webhook_calls");
//! assert_eq!(
//!     AppQueues::Emails.config(),
//!     QueueConfig::new("myapp.mail")
//!         .prefetch(32)
//!         .durable(true)
//!         .message_ttl(Duration::from_secs(30))
//!         .max_priority(5)
//!         .retry(RetryPolicy::new(3, Backoff::fixed(Duration::from_secs(10))?)?),
//! );
//! assert_eq!(AppQueues::WebhookCalls.config(), QueueConfig::new("myapp.webhook_calls"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `#[queues(..)]`, on the enum:
//!
//! | key | value | default |
//! |---|---|---|
//! | `prefix` | a string; queue names become `"{prefix}.{name}"`. No whitespace, no leading or trailing `.`, and the names it makes must not start with `amq.` | no prefix |
//!
//! `#[queue(..)]`, on a variant:
//!
//! | key | value | default |
//! |---|---|---|
//! | `name` | a string: not blank, no whitespace, not starting with `amq.`; the full name (prefix included) is at most 255 bytes and unique in the set | the variant's name in snake_case (`WebhookCalls` → `webhook_calls`) |
//! | `prefetch` | an integer, 1 to 65535 | 16 |
//! | `durable` | `true` or `false` | `true` |
//! | `message_ttl` | a [duration](#durations) of at most 10 years | none |
//! | `max_priority` | an integer, 0 to 255; 0 declares the queue without priorities | 10 (none on a quorum queue) |
//! | `queue_type` | `"classic"` or `"quorum"`; a quorum queue is replicated and has no priority levels, so `max_priority` above 0 and `durable = false` are refused with it | `"classic"` |
//! | `retry(..)` | a [retry block](#retry-blocks): the queue's own policy | none |
//!
//! The enum cannot be generic, needs at least one variant, and its variants
//! cannot have fields.
//!
//! # `#[derive(Job)]`
//!
//! On a struct or enum (which must also implement `Serialize` and
//! `Deserialize`). Implements `Job`.
//!
//! ```
//! use queuey_core::{Job, Queues};
//! use serde::{Deserialize, Serialize};
//!
//! mod queues {
//!     #[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
//!     pub enum AppQueues {
//!         Emails,
//!     }
//! }
//!
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = queues::AppQueues::Emails, name = "send_email", retry(max_attempts = 3))]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = queues::AppQueues::Emails)]
//! struct Newsletter;
//!
//! assert_eq!(SendEmail::QUEUE, queues::AppQueues::Emails);
//! assert_eq!(SendEmail::NAME, "send_email");
//! assert_eq!(SendEmail::retry_policy().unwrap().max_attempts(), 3);
//! assert_eq!(Newsletter::NAME, "Newsletter");
//! assert_eq!(Newsletter::retry_policy(), None);
//! ```
//!
//! `#[job(..)]`:
//!
//! | key | value | default |
//! |---|---|---|
//! | `queue` | **required**: a path to a variant of a `#[derive(Queues)]` enum, like `AppQueues::Emails` or `crate::queues::AppQueues::Emails`; `Job::Queues` is the path without its last segment | — |
//! | `name` | a string, not blank; stored in each envelope as `job_type` (see [Job names](#job-names)) | the type's name |
//! | `retry(..)` | a [retry block](#retry-blocks): the job's own policy, which wins over its queue's | none (`retry_policy()` returns `None`) |
//! | `output` | a type (`Serialize + Deserialize`): what the handler returns on success, sent back to a caller that waits for the job (`enqueue_and_wait`) | `()` |
//!
//! ## Job names
//!
//! A job's name travels in every envelope and picks the handler that runs
//! it: it is the job type's wire name. Without `name`, it is the Rust type's
//! name, so **renaming the type renames the job**: jobs already queued under
//! the old name (waiting on the queue, in a retry or deferral hold) then find
//! no handler, and a worker dead-letters them with the reason `no handler for
//! job type ...`. Give `name` to every job type whose jobs outlive a deploy,
//! and keep it when the type is renamed:
//!
//! ```
//! # use queuey_core::{Job, Queues};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! # enum AppQueues { Emails }
//! // Was `struct SendReceipt`: the name its queued jobs carry stays.
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = AppQueues::Emails, name = "SendReceipt")]
//! struct EmailReceipt {
//!     to: String,
//! }
//!
//! assert_eq!(EmailReceipt::NAME, "SendReceipt");
//! ```
//!
//! A job type cannot be generic: every instantiation would share one name,
//! and the name is what picks a job's handler. Wrap the generic type in a
//! concrete one instead.
//!
//! # Retry blocks
//!
//! `retry(..)` builds a `RetryPolicy`. Every key is optional; `retry()` alone
//! is `RetryPolicy::default()`.
//!
//! | key | value | default |
//! |---|---|---|
//! | `max_attempts` | an integer, 1 to 4294967295, the first attempt included | 5 |
//! | `backoff` | `"none"`, `"fixed"` or `"exponential"` | `"exponential"` |
//! | `delay` | fixed only, required there: the [duration](#durations) between attempts, at most `"24d"` (the longest wait a hold accepts) | — |
//! | `base` | exponential only: the first wait | `"1s"` |
//! | `factor` | exponential only: a number (integer or float), finite, at least 1 | 2 |
//! | `max` | exponential only: the cap, at least `base` and at most `"24d"` | `"5m"` |
//! | `jitter` | exponential only: full jitter on or off | `true` |
//!
//! A key that does not belong to the backoff chosen is an error (`delay`
//! with exponential backoff, `base` with fixed, anything besides
//! `max_attempts` with none).
//!
//! ```
//! use std::time::Duration;
//! use queuey_core::{Backoff, QueueConfig, Queues, RetryPolicy};
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! enum Q {
//!     #[queue(retry(max_attempts = 8, base = "500ms", factor = 1.5, max = "1h", jitter = false))]
//!     Slow,
//! }
//!
//! let expected = RetryPolicy::new(
//!     8,
//!     Backoff::exponential(Duration::from_millis(500), 1.5, Duration::from_secs(3600))?
//!         .without_jitter(),
//! )?;
//! assert_eq!(Q::Slow.config().settings().retry(), Some(&expected));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Durations
//!
//! A string holding a whole number and a unit: `"500ms"`, `"30s"`, `"5m"`,
//! `"1h"`, `"2d"`. Zero is refused, and so are bare integers (`30` could
//! mean seconds or milliseconds: write `"30s"` or `"30ms"`), fractions
//! (write `"1500ms"`, not `"1.5s"`) and compound forms like `"1m30s"` (write
//! `"90s"`).
//!
//! # Errors
//!
//! Every mistake is a compile error on the offending token, saying what to
//! write instead: unknown or repeated keys, values of the wrong type or out of
//! range, bad names, durations or backoffs, and derives on the wrong kind of
//! item.
//!
//! ```compile_fail
//! #[derive(queuey_core::Queues, Clone, Copy)]
//! enum Q {
//!     #[queue(prefetch = 0)] // error: `prefetch` must be between 1 and 65535, got 0
//!     Emails,
//! }
//! ```
//!
//! [queuey]: https://docs.rs/queuey

#![cfg_attr(docsrs, feature(doc_cfg))]

mod attr;
mod crate_path;
mod job;
mod queues;

use proc_macro::TokenStream;
use syn::DeriveInput;

/// Implements `Queues` for a fieldless enum; see the [crate docs](crate)
/// for the `#[queues(..)]` and `#[queue(..)]` attributes.
#[proc_macro_derive(Queues, attributes(queues, queue))]
pub fn derive_queues(input: TokenStream) -> TokenStream {
    expand_with(input, queues::expand)
}

/// Implements `Job` for a struct or enum; see the [crate docs](crate) for
/// the `#[job(..)]` attribute.
#[proc_macro_derive(Job, attributes(job))]
pub fn derive_job(input: TokenStream) -> TokenStream {
    expand_with(input, job::expand)
}

/// Parses the item and runs a derive, turning its error into
/// `compile_error!`s at the spans it names.
fn expand_with(
    input: TokenStream,
    derive: fn(DeriveInput) -> syn::Result<proc_macro2::TokenStream>,
) -> TokenStream {
    match syn::parse::<DeriveInput>(input).and_then(derive) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
