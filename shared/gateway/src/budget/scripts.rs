//! The Lua scripts of the budgets' Redis side (docs/models-and-budgets.md, where budgets
//! live). A user's day and month keys hold **settled** tokens, a copy of the PostgreSQL rows;
//! calls in flight are **holds** in a sorted set per user, each member `{id}:{tokens}` scored
//! by the time its lease ends, so a hold whose release never arrives (a killed process, a
//! release that failed) stops counting when its lease ends instead of for the rest of the day.

use std::sync::LazyLock;

/// What [`RESERVE`] answered.
pub(super) const RESERVED: i64 = 1;
pub(super) const OVER_DAILY: i64 = 0;
pub(super) const OVER_MONTHLY: i64 = -1;
/// A window key is missing (a new day, or Redis forgot): seed it from PostgreSQL first.
pub(super) const MISSING: i64 = -2;

/// KEYS: day, month, holds. ARGV: tokens, daily limit, monthly limit, now (ms), the hold's
/// member, its lease end (ms). Hold `tokens` against both windows or neither.
pub(super) static RESERVE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local d = redis.call('GET', KEYS[1])
local m = redis.call('GET', KEYS[2])
if not d or not m then return -2 end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[4])
local held = 0
for _, h in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  held = held + (tonumber(string.match(h, ':(%d+)$')) or 0)
end
local n = tonumber(ARGV[1])
if tonumber(d) + held + n > tonumber(ARGV[2]) then return 0 end
if tonumber(m) + held + n > tonumber(ARGV[3]) then return -1 end
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[5])
redis.call('PEXPIREAT', KEYS[3], ARGV[6])
return 1
",
    )
});

/// KEYS: day, month. ARGV: day value, month value, day ttl, month ttl. Raise each key to its
/// value from PostgreSQL (never lower it: a key may already count usage the row has too).
pub(super) static SEED: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
for i = 1, 2 do
  local cur = tonumber(redis.call('GET', KEYS[i]) or '-1') or -1
  if tonumber(ARGV[i]) > cur then
    redis.call('SET', KEYS[i], ARGV[i], 'EX', ARGV[2 + i])
  end
end
return 1
",
    )
});

/// KEYS: day, month, holds. ARGV: the hold's member, tokens used, day total, month total,
/// day ttl, month ttl. End a hold: drop it and add the used tokens to both windows; a window
/// key Redis forgot (a restart during the call) is set to its total from PostgreSQL, which
/// already has this usage. (Without PostgreSQL the totals are the used tokens.)
pub(super) static SETTLE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
redis.call('ZREM', KEYS[3], ARGV[1])
local n = tonumber(ARGV[2])
if n > 0 then
  for i = 1, 2 do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      redis.call('INCRBY', KEYS[i], n)
    else
      redis.call('SET', KEYS[i], ARGV[2 + i])
    end
    redis.call('EXPIRE', KEYS[i], ARGV[4 + i])
  end
end
return 1
",
    )
});

/// KEYS: day, month, holds. ARGV: now (ms). Settled tokens of both windows (`false` when a
/// key is missing) and the tokens of live holds.
pub(super) static USED: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local held = 0
for _, h in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf')) do
  held = held + (tonumber(string.match(h, ':(%d+)$')) or 0)
end
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), held}
",
    )
});

/// Add ARGV[1] micro-dollars to today's spend (KEYS[1]), refresh its expiry (ARGV[2]) and
/// return the new total; a key Redis forgot is set to ARGV[3] (the day's total in PostgreSQL,
/// which already has this cost; the cost itself without PostgreSQL). Builds before the switch
/// to integers kept this key in dollars by `INCRBYFLOAT` ("0.00105"): such a value is read as
/// that old format and rewritten in micro-dollars first, so an upgrade in the middle of a day
/// keeps the day's spend.
pub(super) static ADD_SPEND: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
  return tonumber(ARGV[3])
end
if not string.match(v, '^%d+$') then
  local usd = tonumber(v) or 0
  redis.call('SET', KEYS[1], string.format('%d', math.floor(usd * 1000000 + 0.5)))
end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return total
",
    )
});

/// KEYS[1]: today's spend. ARGV: the day's total in PostgreSQL, ttl. Raise the key to the
/// total (never lower it), after costs this process could not add while Redis was away.
pub(super) static RAISE_SPEND: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
return 1
",
    )
});
