//! The server-side scripts that make "only if it holds my value" atomic.

use std::sync::LazyLock;

use redis::Script;

/// `SET NX PX`, answering the value already held (nil when set).
pub(crate) static INSERT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
            return false
          end
          return redis.call('GET', KEYS[1])",
    )
});

/// A new time-to-live if the key holds the value: 1 if so, else 0.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
            return redis.call('PEXPIRE', KEYS[1], ARGV[2])
          end
          return 0",
    )
});

/// Deletes the key if it holds the value: 1 if so, else 0.
pub(crate) static REMOVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
            return redis.call('DEL', KEYS[1])
          end
          return 0",
    )
});
