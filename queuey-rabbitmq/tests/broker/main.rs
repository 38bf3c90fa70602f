//! Tests against a real RabbitMQ.
//!
//! They read `AMQP_URL` (for example `amqp://guest:guest@127.0.0.1:5672/%2f`);
//! without it each test prints a notice and passes, unless
//! `QUEUEY_REQUIRE_BROKER=1`, which turns the skip into a failure. Each test
//! names its queues with a fresh UUID and deletes them (hold and dead-letter
//! queues included) when it ends, even by panicking; each names its
//! connections uniquely and only ever closes its own; assertions go through
//! a second, plain lapin connection or `rabbitmqctl`. Tests run in parallel
//! against one broker.
//!
//! # Checklist: each documented statement of the backend, and its proof
//!
//! Unit tests live beside the code (`src/*.rs`); broker tests are here.
//!
//! | statement | proven by |
//! |---|---|
//! | one connection; confirm-mode publishing channels, nothing declared on them, one publish at a time each | `publish::concurrent_publishes_never_misattribute_returns` (2 000 publishes from 200 tasks, one in ten unroutable, through 1 channel and through 8: none misattributed) |
//! | a publishing channel closed by a channel exception is reopened on next use; a refused declaration does not take publishing down | `publish::a_publishing_channel_closed_by_the_broker_is_reopened` (`ACCESS_REFUSED` for a user of the test's own, nothing broker-wide), `declare::a_queue_without_priorities_is_refused_and_publishing_still_works` |
//! | hold declarations on their own channel; a refusal leaves the rest working | `declare::a_foreign_hold_queue_makes_retry_fail_and_the_delivery_stays_unacked` |
//! | the hold-declaration channel a refusal closed is reopened on next use | `declare::the_hold_declaration_channel_reopens_after_a_refusal` |
//! | a fresh channel per consume with `basic_qos(prefetch, global = false)` | `consume::prefetch_bounds_unacknowledged_deliveries` |
//! | a throwaway channel per declare | `declare::a_queue_without_priorities_is_refused_and_publishing_still_works` |
//! | default exchange, routing key = queue, mandatory, persistent, confirmed; only a bare ack is success | `publish::properties_on_the_wire`, `publish::a_publish_to_a_missing_queue_is_no_route` |
//! | the three error texts (nack, 312 NO_ROUTE, confirms not enabled) | `publish::a_nack_is_an_error`, `publish::a_publish_to_a_missing_queue_is_no_route`; unit `error::tests::the_three_documented_messages` |
//! | a `312 NO_ROUTE` on a work queue says it was never declared and what declares it, or that it was deleted since this backend declared it | `publish::a_publish_to_a_missing_queue_is_no_route`, `publish::a_publish_to_a_deleted_declared_queue_says_it_was_deleted`; unit `error::tests::a_publish_to_a_missing_work_queue_says_it_was_never_declared` |
//! | a refused connection names the address (password masked) and says to check that RabbitMQ runs there and that `AMQP_URL` is right | `connection::a_refused_connection_says_to_check_that_rabbitmq_runs_there`; unit `link::dial::hint::tests::an_address_nothing_answers_at_says_what_to_check` |
//! | a return carrying another message's id is an alarm | unit `error::tests::another_messages_return_is_an_alarm_not_a_success` |
//! | `q`: durable per config, `x-message-ttl`, `x-max-priority` when `Some`, classic | `declare::declare_is_idempotent_and_queues_have_the_documented_arguments`; unit `topology::tests::work_queue_arguments_follow_the_config` |
//! | `q.dead`: no arguments but the classic type | `declare::declare_is_idempotent_and_queues_have_the_documented_arguments` |
//! | hold queue `q.deferred.{ttl}`: TTL, DLX `""`, routing key `q`, `x-expires = 2 * ttl`, classic, durable, no priority | `declare::hold_queues_have_the_documented_arguments`; unit `topology::tests::hold_queue_arguments_expire_after_twice_the_ttl`, `declare::tests::field_tables_use_only_long_strings_and_fitting_integers` |
//! | `declare` is idempotent | `declare::declare_is_idempotent_and_queues_have_the_documented_arguments` |
//! | `PRECONDITION_FAILED` (a `q` without `x-max-priority`) surfaces from `declare`; `max_priority(0)` declares it as before | `declare::a_queue_without_priorities_is_refused_and_publishing_still_works` |
//! | delays rounded up, never early; zero or sub-millisecond granularity counts as 1 ms; holds under 50 ms wait 50 ms | `holds::holds_are_never_early_and_arrive_within_a_margin`, `holds::a_sub_millisecond_granularity_counts_as_one_millisecond` (50.5 ms at 500 µs waits in `q.deferred.51`, 1.5 ms in `q.deferred.50`); unit `topology::tests::holds_are_never_early` (proptest) |
//! | `retry_granularity` rounds retries and delayed enqueues, `deferred_granularity` deferrals (`Backend::defer` too) | `holds::each_granularity_rounds_its_own_kind_of_hold`, `holds::backend_defer_returns_the_job_with_the_queues_top_priority` |
//! | a hold relies on a declaration of its hold queue sent less than a quarter of a TTL ago, else declares it; a deleted hold queue comes back `NO_ROUTE` and is declared again; an idle one deletes itself | `holds::a_deleted_hold_queue_is_declared_again_by_the_next_hold`, `holds::an_idle_hold_queue_deletes_itself`, `declare::hold_queues_have_the_documented_arguments`; unit `outbox::leases::tests` |
//! | a hold confirmed a TTL or more after the declaration it relied on renews its hold queue's lease, or publishes again when the lease may have run out | `holds::holds_behind_a_burst_of_publishes_all_come_back` |
//! | behind a burst of publishes every hold succeeds and every held job comes back (an expired hold queue is declared again) | `holds::holds_behind_a_burst_of_publishes_all_come_back` (1 500 publishes and 20 holds through one channel) |
//! | every hold publish carries `queuey-due-at` (i64 ms since the epoch), and the job is released no earlier | `holds::holds_carry_the_time_they_become_due`; unit `properties::tests::holds_carry_their_due_time_as_a_64_bit_integer` |
//! | `x-expires` past `i32::MAX` (the longest hold) goes out as a 64-bit integer and the broker takes it | `declare::the_longest_hold_has_an_x_expires_past_32_bits`; unit `declare::tests::field_tables_use_only_long_strings_and_fitting_integers` |
//! | a hold needs the queue declared through this backend (`UnknownQueue`) | `declare::refusals_happen_before_anything_is_created` |
//! | the delay must fit, checked after rounding (`DelayTooLong`), and a refused one creates no hold queue | `declare::refusals_happen_before_anything_is_created`, `declare::a_hold_past_the_cap_creates_no_hold_queue`; unit `topology::tests::hold_names_refuse_zero_and_too_long_delays` |
//! | the name must leave room for its hold queues; refused before anything is created, with the documented message | `declare::refusals_happen_before_anything_is_created`; unit `topology::tests::room_for_hold_queues_is_checked_with_the_documented_message`, proptests `hold_names_fit_or_fail`, `hold_names_are_injective` |
//! | failures happen before the ack: the original stays unacked and comes back | `declare::a_foreign_hold_queue_makes_retry_fail_and_the_delivery_stays_unacked` |
//! | an unsettled delivery is handed back after `REQUEUE_DELAY`, so failures in a row never stall a consumer | `consume::failed_settles_do_not_stall_the_consumer` (prefetch 1, two failed retries, a later job still arrives) |
//! | a deferral carries the top priority and overtakes the backlog | `holds::a_deferral_overtakes_the_backlog`, `holds::backend_defer_returns_the_job_with_the_queues_top_priority` (the producer's `Backend::defer`; attempt and deferrals as sent) |
//! | a retry carries priority 0 and keeps FIFO | `holds::a_retry_joins_the_back_of_the_queue` |
//! | dead letters: `x-death-reason` (capped), `x-original-queue`, `x-attempts`, body verbatim | `dead_letters::dead_letters_carry_their_headers_and_the_body_verbatim`; unit `properties::tests::reasons_are_capped_on_a_char_boundary` |
//! | a malformed body goes verbatim to `q.dead` with `malformed envelope`, is acked, never reaches the stream | `consume::a_malformed_body_goes_verbatim_to_the_dead_letter_queue` |
//! | a dead-letter queue found missing (`NO_ROUTE`) is declared once and the dead letter or malformed copy published again | `dead_letters::a_deleted_dead_letter_queue_is_declared_again` |
//! | `declare_dead_letter_queues(false)`: no `q.dead`; dead letters rejected to the broker's policy | `dead_letters::without_dead_letter_queues_the_brokers_policy_applies` |
//! | `declare_dead_letter_queues(false)`: a malformed body is rejected without requeue, never reaches the stream, and is logged | `consume::without_dead_letter_queues_a_malformed_body_is_rejected_and_logged` |
//! | `x-death`, `x-first-death-*`, `x-last-death-*`, `CC`, `BCC` never copied | `dead_letters::republishes_never_carry_cc_bcc_or_death_headers`, `consume::a_malformed_body_goes_verbatim_to_the_dead_letter_queue` |
//! | properties: persistent, message id = job id, priority only when non-zero on a queue with priorities; nothing else | `publish::properties_on_the_wire`; unit `properties::tests::job_properties_are_persistence_id_and_priority_only` |
//! | messages written by earlier versions (content type, type and timestamp too) are consumed as before | `consume::messages_with_the_earlier_properties_are_consumed` |
//! | body size checked before publishing (16 MiB default) | `publish::an_oversize_body_is_refused_before_publishing` |
//! | consumer tags `queuey.{queue}.{nanos:x}.{sequence}`, queue cut to 160 bytes | `consume::consumer_tags_and_the_connection_name_show_on_the_broker`; unit `consumer::tag::tests` |
//! | the connection name (and client properties) show on the broker | `consume::consumer_tags_and_the_connection_name_show_on_the_broker` |
//! | connection loss: stream yields `Err` (ConnectionLost) then ends; later calls fail; nothing acked | `connection::a_lost_connection_ends_streams_with_an_error_and_acks_nothing` |
//! | a broker-side cancel ends the stream with `None` | `consume::a_broker_side_cancel_ends_the_stream` |
//! | `close()` ends streams; later calls fail | `connection::close_ends_streams_and_later_calls_fail` |
//! | the password never appears in `Debug`, errors or logs | `connection::the_password_never_shows_in_debug_errors_or_logs`; unit `uri::tests` |
//! | `dead_suffix` and `deferred_suffix` name the dead-letter and hold queues (`dead_suffix("-dlq")` as in the README's example) | `dead_letters::custom_suffixes_name_the_dead_letter_and_hold_queues` |
//! | option defaults | unit `options::tests::defaults` |
//! | a control command sent by one backend reaches another's view (within 2 s; latency printed) | `control::a_command_sent_by_one_backend_reaches_another_within_two_seconds` |
//! | `follow_control` returns caught up with every command sent before it (sync marker); later calls return the same view | `control::a_backend_started_after_the_commands_has_them_all_when_follow_control_returns`; unit `fleet::control::message::tests`, `fleet::control::syncs::tests` |
//! | the follower consumes again after a lost connection from the offset after the last record read: commands sent meanwhile arrive, nothing is applied twice | `control::the_follower_resumes_after_its_connection_is_closed_and_applies_nothing_twice` |
//! | catching up with 10,000 cancellations (time and memory printed) | `control::ten_thousand_cancellations_are_caught_up_with` |
//! | a pause a week old is published again; a resume read after the renewer's offset wins | `control::a_pause_a_week_old_is_renewed_and_a_resume_still_wins`; unit `fleet::control::renew::tests` |
//! | the control stream's arguments are constant; a queue of its name declared otherwise is refused with what to do | `control::a_control_stream_declared_otherwise_is_refused_with_what_to_do`; unit `topology::control::tests`, `declare::stream::tests` |
//! | the control state survives a broker restart | the workspace's `tests/faults/control.rs` (a private node) |
//! | `Disposition::Requeue` and a dropped stream's buffered deliveries go back as new messages: not redelivered, count unchanged, nothing moved by the guard | `hand_back::a_job_handed_back_and_a_dropped_streams_jobs_come_back_as_first_deliveries`, `hand_back::five_pause_and_resume_rounds_under_a_backlog_dead_letter_nothing`; unit `outbox::hand_back::tests` |
//! | `close()` waits for dropped streams to finish handing back | `hand_back::closing_the_backend_right_after_dropping_a_stream_still_hands_everything_back` |
//! | pruning needs a census: without the `management` feature and without one, the backend prunes no hold by itself and `prune_hold` keeps every hold; with the feature the management API counts the jobs, and an API that cannot be read keeps every hold and says so once at INFO without the password | `prune::without_the_management_feature_or_a_census_no_hold_is_pruned`, `prune::with_the_management_feature_the_api_counts_the_jobs_of_a_pruned_hold`, `prune::a_management_api_that_cannot_be_read_keeps_every_hold_and_says_so_once` |
//! | a schedule keeps its last tick through 100 leader changes in a row, on a schedule queue created without a delivery limit (each new leader publishes the state afresh) | `schedule_memory::a_schedule_keeps_its_last_tick_through_a_hundred_leader_changes` |
//! | a new schedule queue has `x-delivery-limit = SAFE_DELIVERY_LIMIT`; one created without it is still led | `schedule_memory::a_new_schedule_queue_has_the_safe_delivery_limit`, `schedule_memory::a_schedule_keeps_its_last_tick_through_a_hundred_leader_changes`; unit `topology::schedule::tests` |
//! | a lost state message: the next leader, in line or new, recovers the last tick from the status queue | `schedule_memory::a_lost_state_is_recovered_from_the_status_queue`, `schedule_memory::a_waiting_candidate_leads_with_the_last_tick_when_the_state_is_lost` |
//! | a job exchange: declared with the queues, each work queue bound to it; jobs now and for later (never early: a worker holds them until due) go through it; a job for a queue not bound to it fails `Unroutable` naming the exchange | `job_exchange::jobs_go_through_the_job_exchange_now_and_later_never_early`; the permissions on a private node: the workspace's `tests/fleet_trust/exchange.rs` |

#[macro_use]
mod support;

mod buckets;
mod connection;
mod consume;
#[cfg(feature = "fleet")]
mod control;
mod dead_letters;
mod declare;
mod guard;
mod hand_back;
mod holds;
mod job_exchange;
#[cfg(feature = "fleet")]
mod leader;
mod prune;
mod publish;
mod quorum;
mod rehold;
#[cfg(feature = "fleet")]
mod schedule_memory;
