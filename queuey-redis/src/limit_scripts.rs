//! The server-side scripts of per-key limits, one per operation, so each is
//! atomic. Time is the server's (`TIME`), in microseconds; every key gets a
//! time-to-live that ends when what it holds stops mattering.
//!
//! The keys of a limit key `K`: `K:slots` (sorted set: holder → end of its
//! lease), `K:started` (hash: holder → when it took its slot), `K:waiting`
//! (sorted set: refused holder → when it stops counting), `K:hold` (the
//! typical hold time), `K:rate` (hash: the theoretical arrival times `tat`
//! of turns given out, `st` of starts made and `lt` of turns promised, and
//! `tolerance`), `K:turns` (sorted set: holder → when its turn is due).

use std::sync::LazyLock;

use redis::Script;

/// The clock and the expiry every script shares.
const PRELUDE: &str = r"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- Lets `key` (a sorted set scored by instants) live until its last score
-- plus `extra` microseconds; answers the time-to-live in milliseconds.
local function expire_after_last(key, now, extra)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    local ttl = math.ceil((tonumber(last[2]) + extra - now) / 1000) + 1
    redis.call('PEXPIRE', key, ttl)
    return ttl
  end
  return 1
end
-- Drops the slots whose lease ended, and when they were taken.
local function drop_ended(slots, started, now)
  local ended = redis.call('ZRANGEBYSCORE', slots, '-inf', now)
  for _, holder in ipairs(ended) do
    redis.call('ZREM', slots, holder)
    redis.call('HDEL', started, holder)
  end
end
-- The typical hold time kept at `key`, in whole microseconds, or -1.
local function typical_hold(key)
  local hold = redis.call('GET', key)
  if hold then
    return math.floor(tonumber(hold) + 0.5)
  end
  return -1
end
";

fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

/// KEYS: slots, started, waiting, hold. ARGV: holder, limit, lease (µs).
/// Answers `{1}` when taken, `{2, µs left on the lease}` when the holder
/// already holds a slot, else `{0, running, waiting, typical hold in µs or
/// -1}`.
pub(crate) static TAKE_SLOT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local now = now_us()
local holder, limit, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
drop_ended(KEYS[1], KEYS[2], now)
local till = now + lease
local held = redis.call('ZSCORE', KEYS[1], holder)
if held then
  return {2, math.ceil(tonumber(held) - now)}
end
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], till, holder)
  redis.call('HSET', KEYS[2], holder, now)
  redis.call('ZREM', KEYS[3], holder)
  redis.call('PEXPIRE', KEYS[2], expire_after_last(KEYS[1], now, 0))
  return {1}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], till, holder)
expire_after_last(KEYS[3], now, 0)
return {0, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[3]), typical_hold(KEYS[4])}
",
    )
});

/// KEYS: slots, started. ARGV: holder, lease (µs). Answers 1 if renewed,
/// 0 if the holder holds no slot.
pub(crate) static RENEW_SLOT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local now = now_us()
drop_ended(KEYS[1], KEYS[2], now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], expire_after_last(KEYS[1], now, 0))
return 1
",
    )
});

/// KEYS: slots, started, hold. ARGV: holder, weight of a new hold, how long
/// the average is kept (ms). Answers 1 if freed, 0 if the holder held no
/// slot.
pub(crate) static FREE_SLOT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local now = now_us()
drop_ended(KEYS[1], KEYS[2], now)
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local taken = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if taken then
  local hold = now - tonumber(taken)
  local average = redis.call('GET', KEYS[3])
  if average then
    average = tonumber(average)
    hold = average + tonumber(ARGV[2]) * (hold - average)
  end
  redis.call('SET', KEYS[3], hold, 'PX', ARGV[3])
end
return 1
",
    )
});

/// KEYS: rate, turns. ARGV: holder, interval (µs), tolerance (µs), grace
/// (µs), `1` to book (keep the reservation even when due now). Answers 0
/// for a start now (booked: due now), else the wait in µs (at least 1).
///
/// The rate hash holds the key's three clocks: `tat` (turns given out),
/// `st` (starts made) and `lt` (turns promised to holders whose turn came
/// due too close to the last start).
pub(crate) static RESERVE_TURN: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local now = now_us()
local holder = ARGV[1]
local interval, tolerance, grace = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local book = ARGV[5] == '1'
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - grace)
local clocks = redis.call('HMGET', KEYS[1], 'tat', 'st', 'lt')
local tat = math.max(tonumber(clocks[1]) or now, now)
-- The starts as recorded: behind now once the rate allows the next.
local started = tonumber(clocks[2])
local st = math.max(started or now, now)
local lt = math.max(tonumber(clocks[3]) or now, now)
local function save()
  local idle = math.max(tat, st, lt) + interval
  local fields = {'tat', tat, 'lt', lt, 'tolerance', tolerance}
  if started then
    fields[7], fields[8] = 'st', started
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('PEXPIRE', KEYS[1], math.ceil((idle - now) / 1000) + 1)
end
local function reserve(due)
  redis.call('ZADD', KEYS[2], due, holder)
  expire_after_last(KEYS[2], now, grace)
  return math.ceil(due - now)
end
-- A start now, counted at `turn` when that is a reserved turn less than an
-- interval ago, else now.
local function start(turn)
  local counted = now
  if turn and now - turn < interval then
    counted = turn
  end
  started = math.max(started or counted, counted) + interval
  st = math.max(started, now)
  save()
  return 0
end
local due = redis.call('ZSCORE', KEYS[2], holder)
if due then
  due = tonumber(due)
  if due > now then
    return math.ceil(due - now)
  end
  if book then
    return 0
  end
  if st - tolerance > now then
    local promise = math.max(lt, st - tolerance)
    lt = promise + interval
    save()
    return reserve(promise)
  end
  redis.call('ZREM', KEYS[2], holder)
  return start(due)
end
local base = math.max(tat, st, lt)
tat = base + interval
due = base - tolerance
if due > now or book then
  save()
  return reserve(math.max(due, now))
end
return start(nil)
",
    )
});

/// KEYS: slots, waiting, rate, hold. Answers `{running, waiting, next turn
/// in µs or -1, typical hold in µs or -1}`; writes nothing.
pub(crate) static LIMIT_USAGE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r"
local now = now_us()
local running = redis.call('ZCARD', KEYS[1]) - redis.call('ZCOUNT', KEYS[1], '-inf', now)
local waiting = redis.call('ZCARD', KEYS[2]) - redis.call('ZCOUNT', KEYS[2], '-inf', now)
local rate = redis.call('HMGET', KEYS[3], 'tat', 'tolerance', 'st', 'lt')
local next_turn = -1
if rate[1] and rate[2] then
  local idle = math.max(tonumber(rate[1]), tonumber(rate[3]) or 0, tonumber(rate[4]) or 0)
  local due = idle - tonumber(rate[2])
  if due > now then
    next_turn = math.ceil(due - now)
  end
end
return {running, waiting, next_turn, typical_hold(KEYS[4])}
",
    )
});
