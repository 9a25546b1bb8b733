//! The server-side scripts (Lua, run by Redis or Valkey atomically) that change what replicas
//! share: each runs in one round trip, and no other client sees it half done. Time is the
//! store's own (`TIME`), so replicas whose clocks differ still share one bucket and one day.
//!
//! Keys (under [`super::KEY_PREFIX`]): `quota:HOLDER` (a hash: `bucket`, `refilled` in ms,
//! `day`, `used_us`, `used_fuel`) and `lease:HOLDER` (a sorted set of in-flight leases, scored
//! by when each expires) for each tenant's and token's quota; `task:ID` (a hash: `owner`,
//! `status`, `replica`, `created`, `updated`, `ttl`, `result`, `message`), `tasks:OWNER` (a
//! sorted set of an owner's task ids, scored by when each record expires), `cancel:ID` (a
//! cancellation asked through another replica) and `replica:ID` (a replica's heartbeat).

use redis::Script;
use std::sync::LazyLock;

/// Admit one call under `n` quotas at once, or say which refused it; nothing is taken unless
/// all admit. `KEYS`: each quota's hash and lease set, in order. `ARGV`: `n`, the lease's
/// member, its time to live (ms), then for each quota: rate (calls a second, 0 for none),
/// burst, in-flight bound (0: none), daily microseconds (0: none), daily fuel (0: none).
/// Answers `{0}` when admitted, or `{i, kind, retry_after}` for the first quota `i` (from 1)
/// that refused.
pub(crate) static ADMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local seconds = tonumber(t[1])
local now = seconds * 1000 + math.floor(tonumber(t[2]) / 1000)
local day = math.floor(seconds / 86400)
local to_midnight = 86400 - (seconds % 86400)
local n = tonumber(ARGV[1])
local member = ARGV[2]
local ttl = tonumber(ARGV[3])
local kept = {}
for i = 1, n do
  local hash, leases = KEYS[2 * i - 1], KEYS[2 * i]
  local at = 3 + (i - 1) * 5
  local rate, burst = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  local most, daily_us, daily_fuel = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])
  local h = redis.call('HMGET', hash, 'bucket', 'refilled', 'day', 'used_us', 'used_fuel')
  local used_us, used_fuel = tonumber(h[4]) or 0, tonumber(h[5]) or 0
  if tonumber(h[3]) ~= day then used_us = 0; used_fuel = 0 end
  if daily_us > 0 and used_us >= daily_us then return {i, 'daily_ms', to_midnight} end
  if daily_fuel > 0 and used_fuel >= daily_fuel then return {i, 'daily_fuel', to_midnight} end
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  if most > 0 and redis.call('ZCARD', leases) + 1 > most then return {i, 'in_flight', 1} end
  local bucket = burst
  if rate > 0 then
    local b, r = tonumber(h[1]), tonumber(h[2])
    if b and r then bucket = math.min(burst, b + math.max(0, now - r) / 1000 * rate) end
    if bucket < 1 then return {i, 'rate', math.max(1, math.ceil((1 - bucket) / rate))} end
    bucket = bucket - 1
  end
  kept[i] = {bucket, used_us, used_fuel}
end
for i = 1, n do
  local hash, leases = KEYS[2 * i - 1], KEYS[2 * i]
  redis.call('HSET', hash, 'bucket', tostring(kept[i][1]), 'refilled', now, 'day', day,
    'used_us', kept[i][2], 'used_fuel', kept[i][3])
  redis.call('PEXPIRE', hash, 172800000)
  redis.call('ZADD', leases, now + ttl, member)
  redis.call('PEXPIRE', leases, ttl * 4)
end
return {0}
"#,
    )
});

/// Renew leases still held. `KEYS`: lease sets; `ARGV`: the time to live (ms), then the member
/// for each key. A lease already gone (expired while its replica could not reach the store) is
/// not brought back.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], ttl * 4)
end
return #KEYS
"#,
    )
});

/// Give calls' places back and charge what each used to the day it ended in. `KEYS`: for each
/// lease in turn, each of its quotas' hash and lease set; `ARGV`: the number of leases, then
/// for each: how many quotas it has, its member, microseconds, fuel.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local day = math.floor(tonumber(t[1]) / 86400)
local key = 1
for lease = 1, tonumber(ARGV[1]) do
  local at = 2 + (lease - 1) * 4
  local quotas, member = tonumber(ARGV[at]), ARGV[at + 1]
  local micros, fuel = ARGV[at + 2], ARGV[at + 3]
  for i = 1, quotas do
    local hash, leases = KEYS[key], KEYS[key + 1]
    key = key + 2
    redis.call('ZREM', leases, member)
    if tonumber(redis.call('HGET', hash, 'day')) ~= day then
      redis.call('HSET', hash, 'day', day, 'used_us', 0, 'used_fuel', 0)
    end
    redis.call('HINCRBY', hash, 'used_us', micros)
    redis.call('HINCRBY', hash, 'used_fuel', fuel)
    redis.call('PEXPIRE', hash, 172800000)
  end
end
return 1
"#,
    )
});

/// What a quota's holder has used, for `/metrics`: `KEYS` its hash and lease set; answers
/// `{in_flight, used_us, used_fuel}` of today.
pub(crate) static USAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local day = math.floor(tonumber(t[1]) / 86400)
local h = redis.call('HMGET', KEYS[1], 'day', 'used_us', 'used_fuel')
local in_flight = redis.call('ZCOUNT', KEYS[2], now, '+inf')
if tonumber(h[1]) ~= day then return {in_flight, 0, 0} end
return {in_flight, tonumber(h[2]) or 0, tonumber(h[3]) or 0}
"#,
    )
});

/// Make a task's record, if its owner keeps fewer than the bound. `KEYS`: the record, the
/// owner's set; `ARGV`: owner, replica, the bound, the record's time to live while it runs
/// (ms), the creation time (ISO 8601), the task's id. Answers 1, or 0 without room.
pub(crate) static TASK_CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
local ttl = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'status', 'working', 'replica', ARGV[2],
  'created', ARGV[5], 'updated', ARGV[5], 'ttl', ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[6])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"#,
    )
});

/// End a task: its status, result and message, kept for its time to live from now. A task
/// already ended (cancelled, or failed because its replica was taken for dead) keeps its first
/// end. `KEYS`: the record, the owner's set; `ARGV`: status, result (JSON, or empty), message,
/// the time (ISO 8601), the time to live (ms), the task's id. Answers 1 if this ended it.
pub(crate) static TASK_FINISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'working' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[5])
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'result', ARGV[2], 'message', ARGV[3],
  'updated', ARGV[4], 'ttl', ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[6])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"#,
    )
});

/// A task's record as `tasks/get` answers it: `{owner, status, created, updated, ttl, result,
/// message}`, or an empty answer when there is none. A running task whose replica has no
/// heartbeat is ended here, `failed` (its replica stopped). `KEYS`: the record, the owner's
/// set; `ARGV`: the heartbeat keys' prefix, the time (ISO 8601), the ended record's time to
/// live (ms), the task's id, the message.
pub(crate) static TASK_GET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'created', 'updated', 'ttl',
  'result', 'message', 'replica')
if not h[1] then return {} end
if h[2] == 'working' and redis.call('EXISTS', ARGV[1] .. h[8]) == 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'status', 'failed', 'message', ARGV[5], 'updated', ARGV[2],
    'ttl', ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
  h[2] = 'failed'; h[4] = ARGV[2]; h[5] = tostring(ttl); h[7] = ARGV[5]
end
return {h[1], h[2], h[3], h[4], h[5] or '', h[6] or '', h[7] or ''}
"#,
    )
});

/// Ask for a running task to stop, wherever it runs: its owner must match. `KEYS`: the record,
/// the cancellation flag; `ARGV`: owner, the flag's time to live (ms). Answers the replica
/// running it, `''` when it has ended already, or nothing when there is no such task of this
/// owner's.
pub(crate) static TASK_CANCEL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'replica')
if not h[1] or h[1] ~= ARGV[1] then return false end
if h[2] ~= 'working' then return '' end
redis.call('SET', KEYS[2], 1, 'PX', ARGV[2])
return h[3]
"#,
    )
});
