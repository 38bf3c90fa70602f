//! The response future of [`Idempotency`](super::Idempotency).

crate::leased::leased_response_future!(
    /// The response future of [`Idempotency`](super::Idempotency): the
    /// job's run, holding its claim if it runs.
    super::claim::Claim
);
