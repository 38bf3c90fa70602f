//! The response future of [`Limit`](super::Limit).

crate::leased::leased_response_future!(
    /// The response future of [`Limit`](super::Limit): the job's run,
    /// holding its running slot if it takes one.
    super::admit::Held
);
