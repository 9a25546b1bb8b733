//! The server-side scripts (Lua, run by Redis or Valkey atomically) that change what replicas
//! share: each runs in one round trip, and no other client sees it half done. Time is the
//! store's own (`TIME`), so replicas whose clocks differ still share one bucket and one day.
//!
//! Every value a caller chose (a tenant's name, a task's id, a token's id) reaches a script as
//! an argument or inside a key name, never in the script's text: it is data to Redis, whatever
//! it holds (`:`, `*`, `{`, new lines, kilobytes).
//!
//! Keys (under [`super::KEY_PREFIX`]): `epoch` (the store's epoch: a random name, with the `run_id`
//! of the store process it began under, kept as long as its data and that process) and `epoch-grace` (set for [`super::LEASE_REASSERT_GRACE`] when a replica
//! finds the epoch is not the one it saw: the store lost its data); `quota:HOLDER` (a hash:
//! `bucket`, `refilled` in ms,
//! `day`, `used_us`, `used_fuel`) and `lease:HOLDER` (a sorted set of in-flight leases, scored
//! by when each expires) for each tenant's and token's quota; `task:ID` (a hash: `owner`,
//! `status`, `replica`, `created`, `updated`, `ttl`, `result`, `message`), `task-asked:ID` and
//! `task-answers:ID` (a task's questions while it waits for its client, and the answers given,
//! by key, each sealed), `question:NONCE` and `answer:NONCE` (a
//! question a call asked its client on its stream, noted by the replica running it, and the
//! answer posted to another replica, sealed), `levels:OWNER` (a client's sessions' log levels, at most
//! `http::session::MAX_SESSION_LEVELS_PER_CLIENT`), `tasks:OWNER` (a
//! sorted set of an owner's task ids, scored by when each record expires; the record's
//! `result` and `message` are sealed under the operator's key, `lost` notes when its replica
//! was first not heard from, `presumed` marks a failure presumed from that), `cancel:ID` (a
//! cancellation asked through another replica) and `replica:ID` (a replica's heartbeat).

use redis::Script;
use std::sync::LazyLock;

/// The epoch check every script that depends on what the store remembers begins with, as a Lua
/// function: `epoch(epoch_key, grace_key, seen, candidate, grace_ms)` answers the store's
/// epoch. The epoch is kept as `NAME@RUN_ID`, the store process's `run_id` (`INFO server`)
/// when it began: a store with no epoch (flushed, restarted without persistence) or one begun
/// under another process (restarted from a snapshot or an append-only file, which may have lost
/// the latest writes; a replica promoted after a failover; a backup restored) begins
/// `candidate`. Whenever the epoch is not the one the replica saw, or a store that had one
/// begins another, the leases' grace starts (or starts again).
const EPOCH_LUA: &str = r#"
local function epoch(epoch_key, grace_key, seen, candidate, grace)
  local server = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or ''
  local kept = redis.call('GET', epoch_key)
  local e, at
  if kept then
    e, at = string.match(kept, '^([^@]+)@(.*)$')
  end
  if not e or at ~= server then
    if kept or seen ~= '' then
      redis.call('SET', grace_key, 1, 'PX', grace)
    end
    redis.call('SET', epoch_key, candidate .. '@' .. server)
    return candidate
  end
  if seen ~= '' and e ~= seen then
    redis.call('SET', grace_key, 1, 'PX', grace)
  end
  return e
end
"#;

/// A script made of [`EPOCH_LUA`] and `body`.
fn with_epoch(body: &str) -> Script {
    Script::new(&format!("{EPOCH_LUA}{body}"))
}

/// The store's epoch ([`EPOCH_LUA`]). `KEYS`: the epoch, the grace; `ARGV`: seen, candidate,
/// grace (ms). Answers the epoch.
pub(crate) static EPOCH: LazyLock<Script> = LazyLock::new(|| {
    with_epoch("return epoch(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]))")
});

/// Spend an approval token once, in the epoch it was sealed in. `KEYS`: the epoch, the grace,
/// the token's `spent:ID`; `ARGV`: seen, candidate, grace (ms), the token's epoch, until when
/// it stays spent (ms since 1970). Answers `{'first'|'spent'|'stale', epoch}`: `stale` for a
/// token of another epoch (the store forgot which were spent).
pub(crate) static SPEND: LazyLock<Script> = LazyLock::new(|| {
    with_epoch(
        r#"
local e = epoch(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]))
if ARGV[4] ~= e then return {'stale', e} end
if redis.call('SET', KEYS[3], 1, 'NX', 'PXAT', ARGV[5]) then return {'first', e} end
return {'spent', e}
"#,
    )
});

/// Admit one call under `n` quotas at once, or say which refused it; nothing is taken unless
/// all admit. `KEYS`: each quota's hash and lease set, in order, then the epoch and the grace.
/// `ARGV`: `n`, the lease's member (`REPLICA:N:MICROS:FUEL`: the most the call may run, in
/// microseconds, and the most fuel it may burn, 0 for no limit), its time to live (ms), then for each quota: rate (calls a second,
/// 0 for none), burst, in-flight bound (0: none), daily microseconds (0: none), daily fuel (0:
/// none); then seen, candidate, grace (the epoch's). A daily budget admits a call while what
/// was used today and what the calls still running may use (their leases' reservations) is
/// below it (and the same for a daily fuel budget), so calls in flight overshoot it by at most
/// one call's reservation. While the
/// leases' grace runs (the store lost its data moments ago), a call under an in-flight bound
/// is refused as `in_flight`. Answers `{0, epoch}` when admitted, or `{i, kind, retry_after,
/// epoch}` for the first quota `i` (from 1) that refused.
pub(crate) static ADMIT: LazyLock<Script> = LazyLock::new(|| {
    with_epoch(
        r#"
local n = tonumber(ARGV[1])
local at_epoch = 3 + n * 5
local e = epoch(KEYS[2 * n + 1], KEYS[2 * n + 2], ARGV[at_epoch + 1], ARGV[at_epoch + 2],
  tonumber(ARGV[at_epoch + 3]))
local grace = redis.call('PTTL', KEYS[2 * n + 2])
local t = redis.call('TIME')
local seconds = tonumber(t[1])
local now = seconds * 1000 + math.floor(tonumber(t[2]) / 1000)
local day = math.floor(seconds / 86400)
local to_midnight = 86400 - (seconds % 86400)
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
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  if daily_us > 0 or daily_fuel > 0 then
    local reserved_us, reserved_fuel = 0, 0
    for _, m in ipairs(redis.call('ZRANGE', leases, 0, -1)) do
      local us, fuel = string.match(m, ':(%d+):(%d+)$')
      reserved_us = reserved_us + (tonumber(us) or 0)
      reserved_fuel = reserved_fuel + (tonumber(fuel) or 0)
    end
    if daily_us > 0 and used_us + reserved_us >= daily_us then
      return {i, 'daily_ms', to_midnight, e}
    end
    if daily_fuel > 0 and used_fuel + reserved_fuel >= daily_fuel then
      return {i, 'daily_fuel', to_midnight, e}
    end
  end
  if most > 0 and grace > 0 then return {i, 'in_flight', math.ceil(grace / 1000), e} end
  if most > 0 and redis.call('ZCARD', leases) + 1 > most then return {i, 'in_flight', 1, e} end
  local bucket = burst
  if rate > 0 then
    local b, r = tonumber(h[1]), tonumber(h[2])
    if b and r then bucket = math.min(burst, b + math.max(0, now - r) / 1000 * rate) end
    if bucket < 1 then return {i, 'rate', math.max(1, math.ceil((1 - bucket) / rate)), e} end
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
return {0, e}
"#,
    )
});

/// Renew (re-assert) the leases of calls still running. `KEYS`: lease sets; `ARGV`: the time to
/// live (ms), then the member for each key. A lease that is gone while its call still runs
/// (it lapsed while its replica was paused or cut off, or the store lost its data) is added
/// again: a running call is counted, whatever happened to its place meanwhile.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], ttl * 4)
end
return #KEYS
"#,
    )
});

/// Give calls' places back (and with them what they reserved of a daily budget) and charge
/// what each used to the day it ended in. `KEYS`: for each lease in turn, each of its quotas'
/// hash and lease set; `ARGV`: the number of leases, then for each: how many quotas it has,
/// its member, microseconds, fuel.
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

/// End a task: its status, result and message (sealed by the caller), kept for its time to live
/// from now. A task already ended keeps its first end, but for a presumed failure (its replica
/// was not heard from: `TASK_GET`), which the real end replaces; a record the store no longer
/// has (it lost its data, or the record expired) is written whole again, so a result that
/// exists is kept. `KEYS`: the record, the owner's set; `ARGV`: status, result, message, the
/// time (ISO 8601), the time to live (ms), the task's id, its owner, its replica, when it was
/// created (ISO 8601). Answers 1 if this ended it.
pub(crate) static TASK_FINISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local h = redis.call('HMGET', KEYS[1], 'status', 'presumed', 'owner')
if h[3] and h[3] ~= ARGV[7] then return 0 end
if h[1] and h[1] ~= 'working' and h[1] ~= 'input_required' and h[2] ~= '1' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[5])
redis.call('HDEL', KEYS[1], 'presumed', 'lost')
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'result', ARGV[2], 'message', ARGV[3],
  'updated', ARGV[4], 'ttl', ttl, 'owner', ARGV[7], 'replica', ARGV[8])
redis.call('HSETNX', KEYS[1], 'created', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[6])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"#,
    )
});

/// A task's record as `tasks/get` answers it: `{owner, status, created, updated, ttl, result,
/// message}`, or an empty answer when there is none. A running task whose replica has no
/// heartbeat is still `working` ("not heard from") for the grace, from when that was first
/// seen; past it, it is presumed `failed` (its replica stopped), a presumption the task's real
/// end replaces (`TASK_FINISH`). `KEYS`: the record, the owner's set; `ARGV`: the heartbeat
/// keys' prefix, the time (ISO 8601), the ended record's time to live (ms), the task's id, the
/// failure's message, the grace (ms), the message while not heard from.
pub(crate) static TASK_GET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local h = redis.call('HMGET', KEYS[1], 'owner', 'status', 'created', 'updated', 'ttl',
  'result', 'message', 'replica', 'lost')
if not h[1] then return {} end
if h[2] == 'working' or h[2] == 'input_required' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if redis.call('EXISTS', ARGV[1] .. h[8]) == 1 then
    if h[9] then redis.call('HDEL', KEYS[1], 'lost') end
  else
    local lost = tonumber(h[9])
    if not lost then
      redis.call('HSET', KEYS[1], 'lost', now)
      lost = now
    end
    if now - lost < tonumber(ARGV[6]) then
      h[7] = ARGV[7]
    else
      local ttl = tonumber(ARGV[3])
      redis.call('HSET', KEYS[1], 'status', 'failed', 'presumed', 1, 'message', ARGV[5],
        'updated', ARGV[2], 'ttl', ttl)
      redis.call('PEXPIRE', KEYS[1], ttl)
      redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
      if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
      h[2] = 'failed'; h[4] = ARGV[2]; h[5] = tostring(ttl); h[7] = ARGV[5]
    end
  end
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

/// A running task waits for its client's answers: its record says `input_required`, and its
/// questions (each sealed, by key) are what `tasks/get` shows and `tasks/update` may answer.
/// `KEYS`: the record, the questions, the answers; `ARGV`: owner, the time (ISO 8601), how long
/// the questions wait (ms), then each question's key and sealed request. Answers 1, or 0 when
/// the task is not this owner's running one.
pub(crate) static TASK_ASK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local h = redis.call('HMGET', KEYS[1], 'owner', 'status')
if h[1] ~= ARGV[1] or h[2] ~= 'working' then return 0 end
redis.call('DEL', KEYS[2], KEYS[3])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'status', 'input_required', 'updated', ARGV[2])
return 1
"#,
    )
});

/// `tasks/update`: each answer to a question the task waits on is kept (sealed) and the
/// question leaves the waiting ones; an answer to anything else is dropped. Once none waits,
/// the task is `working` again (its replica takes the answers: `TASK_TAKE_ANSWERS`).
/// `KEYS`: the record, the questions, the answers; `ARGV`: owner, the time (ISO 8601), then
/// each answer's key and sealed value. Answers 1, 0 when the task is not waiting, -1 when it
/// is not this owner's.
pub(crate) static TASK_UPDATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local h = redis.call('HMGET', KEYS[1], 'owner', 'status')
if h[1] ~= ARGV[1] then return -1 end
if h[2] ~= 'input_required' then return 0 end
local ttl = redis.call('PTTL', KEYS[2])
for i = 3, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
if redis.call('HLEN', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[1], 'status', 'working', 'updated', ARGV[2])
end
return 1
"#,
    )
});

/// The answers of a task no longer waiting, taken (once): its replica runs the tool again
/// with them. `KEYS`: the record, the questions, the answers. Answers the answers' keys and
/// values, flat, or nothing while the task still waits (or no longer exists: `{-1}`).
pub(crate) static TASK_TAKE_ANSWERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'-1'} end
if status == 'input_required' then return {} end
local answers = redis.call('HGETALL', KEYS[3])
redis.call('DEL', KEYS[2], KEYS[3])
if #answers == 0 then return {'-1'} end
return answers
"#,
    )
});

/// Keep a session's log level for its client, at most `ARGV[4]` sessions a client: expired
/// ones are forgotten first. `KEYS`: the client's levels (a hash: session digest -> `LEVEL|UNTIL`);
/// `ARGV`: the session's digest, its value, until when it holds (ms since 1970), the bound.
/// Answers 1, or 0 when the client has no room.
pub(crate) static LEVEL_SET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  local kept = redis.call('HGETALL', KEYS[1])
  for i = 1, #kept, 2 do
    local until = tonumber(string.match(kept[i + 1], '|(%d+)$') or '0')
    if until <= now then redis.call('HDEL', KEYS[1], kept[i]) end
  end
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3]) - now
if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
"#,
    )
});

/// Keep a client's answer for the replica whose call asked the question: only for a question
/// that replica noted (`question:NONCE`, holding the asker's digest) and that was not answered
/// yet, and once (the note is taken with it). `KEYS`: the note, the answer; `ARGV`: the
/// poster's digest, the sealed answer, its time to live (ms). Answers 1, or 0.
pub(crate) static RELAY_ANSWER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', tonumber(ARGV[3]))
return 1
"#,
    )
});
