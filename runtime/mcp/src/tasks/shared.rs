//! Task records in the shared store (`state/scripts.rs`).

use crate::tasks::record::{
    MAX_TASKS_PER_CLIENT, REPLICA_NOT_HEARD, REPLICA_STOPPED, RUNNING_TASK_TTL, Record, TASK_TTL,
    millis, now_rfc3339,
};

use crate::state::scripts::{
    TASK_ASK, TASK_CANCEL, TASK_CREATE, TASK_FINISH, TASK_GET, TASK_TAKE_ANSWERS, TASK_UPDATE,
};
use crate::state::{Store, Unavailable};
use rmcp::model::{InputRequests, InputResponses, JsonObject, TaskStatus};

fn record_key(id: &str) -> String {
    Store::key(&format!("task:{id}"))
}

fn owner_key(owner: &str) -> String {
    Store::key(&format!("tasks:{}", crate::seal::owner_digest(owner)))
}

fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::InputRequired => "input_required",
        _ => "working",
    }
}

fn status_of(name: &str) -> TaskStatus {
    match name {
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "cancelled" => TaskStatus::Cancelled,
        "input_required" => TaskStatus::InputRequired,
        _ => TaskStatus::Working,
    }
}

fn asked_key(id: &str) -> String {
    Store::key(&format!("task-asked:{id}"))
}

fn answers_key(id: &str) -> String {
    Store::key(&format!("task-answers:{id}"))
}

/// What a question's request or an answer, under `key`, of task `id` of `owner`'s is
/// sealed to: it cannot be moved to another key, task or tenant.
fn keyed_context(id: &str, owner: &str, kind: &str, key: &str) -> Vec<u8> {
    let mut context = context(id, owner);
    for part in [kind, key] {
        context.push(0);
        context.extend_from_slice(part.as_bytes());
    }
    context
}

fn seal(store: &Store, plain: &str, context: &[u8]) -> Result<String, Unavailable> {
    store
        .seal_key()
        .seal_data(plain.as_bytes(), context)
        .map_err(|error| Unavailable {
            store: store.shown().to_owned(),
            why: format!("sealing a task's question or answer: {error}"),
        })
}

/// Task `id` (of `owner`, running here) waits for its client's answers to `questions`.
pub(super) async fn ask(
    store: &Store,
    id: &str,
    owner: &str,
    questions: &InputRequests,
) -> Result<(), Unavailable> {
    let mut sealed = Vec::with_capacity(questions.len() * 2);
    for (key, request) in questions {
        let text = serde_json::to_string(request).unwrap_or_default();
        sealed.push(key.clone());
        sealed.push(seal(store, &text, &keyed_context(id, owner, "asked", key))?);
    }
    let keys = [record_key(id), asked_key(id), answers_key(id)];
    let wait = millis(crate::rounds::ROUND_WAIT);
    let (keys, sealed) = (&keys, &sealed);
    let asked: i64 = store
        .run(|mut connection| async move {
            TASK_ASK
                .key(&keys[0])
                .key(&keys[1])
                .key(&keys[2])
                .arg(owner)
                .arg(now_rfc3339())
                .arg(wait)
                .arg(sealed)
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    if asked == 1 {
        Ok(())
    } else {
        Err(Unavailable {
            store: store.shown().to_owned(),
            why: "the task's record is not running".to_owned(),
        })
    }
}

/// The questions task `id` of `owner`'s waits on, as `tasks/get` shows them.
pub(super) async fn asked(
    store: &Store,
    id: &str,
    owner: &str,
) -> Result<InputRequests, Unavailable> {
    let key = asked_key(id);
    let key = &key;
    let fields: Vec<(String, String)> = store
        .run(|mut connection| async move {
            redis::cmd("HGETALL")
                .arg(key)
                .query_async(&mut connection)
                .await
        })
        .await?;
    Ok(fields
        .into_iter()
        .filter_map(|(name, sealed)| {
            let plain = store
                .seal_key()
                .open_data(&sealed, &keyed_context(id, owner, "asked", &name))?;
            Some((name, serde_json::from_slice(&plain).ok()?))
        })
        .collect())
}

/// What `tasks/update` did.
pub(super) enum Updated {
    Taken,
    NotWaiting,
    Unknown,
}

/// `owner`'s answers to task `id`'s questions, kept for the replica running it.
pub(super) async fn update(
    store: &Store,
    owner: &str,
    id: &str,
    responses: &InputResponses,
) -> Result<Updated, Unavailable> {
    let mut sealed = Vec::with_capacity(responses.len() * 2);
    for (key, answer) in responses {
        let text = serde_json::to_string(answer).unwrap_or_default();
        sealed.push(key.clone());
        sealed.push(seal(
            store,
            &text,
            &keyed_context(id, owner, "answer", key),
        )?);
    }
    let keys = [record_key(id), asked_key(id), answers_key(id)];
    let (keys, sealed) = (&keys, &sealed);
    let updated: i64 = store
        .run(|mut connection| async move {
            TASK_UPDATE
                .key(&keys[0])
                .key(&keys[1])
                .key(&keys[2])
                .arg(owner)
                .arg(now_rfc3339())
                .arg(sealed)
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    Ok(match updated {
        1 => Updated::Taken,
        0 => Updated::NotWaiting,
        _ => Updated::Unknown,
    })
}

/// What a waiting task found when it looked for its answers.
pub(super) enum Taken {
    /// Not all given yet.
    Waiting,
    /// Every question answered: the answers, taken.
    Answers(InputResponses),
    /// The task's record is gone (expired, or the store lost it): it waits no more.
    Gone,
}

/// Task `id`'s answers, once every question has one (taken once).
pub(super) async fn take_answers(
    store: &Store,
    id: &str,
    owner: &str,
) -> Result<Taken, Unavailable> {
    let keys = [record_key(id), asked_key(id), answers_key(id)];
    let keys = &keys;
    let flat: Vec<String> = store
        .run(|mut connection| async move {
            TASK_TAKE_ANSWERS
                .key(&keys[0])
                .key(&keys[1])
                .key(&keys[2])
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    if flat.is_empty() {
        return Ok(Taken::Waiting);
    }
    if flat.len() == 1 {
        return Ok(Taken::Gone);
    }
    let answers = flat
        .chunks_exact(2)
        .filter_map(|pair| {
            let plain = store
                .seal_key()
                .open_data(&pair[1], &keyed_context(id, owner, "answer", &pair[0]))?;
            Some((pair[0].clone(), serde_json::from_slice(&plain).ok()?))
        })
        .collect();
    Ok(Taken::Answers(answers))
}

/// Make the record of task `id`: `false` when its owner has no room.
pub(super) async fn create(store: &Store, id: &str, record: &Record) -> Result<bool, Unavailable> {
    let (record_key, owner_key) = (&record_key(id), &owner_key(&record.owner));
    let made: i64 = store
        .run(|mut connection| async move {
            TASK_CREATE
                .key(record_key)
                .key(owner_key)
                .arg(&record.owner)
                .arg(store.replica())
                .arg(MAX_TASKS_PER_CLIENT)
                .arg(millis(RUNNING_TASK_TTL))
                .arg(&record.created)
                .arg(id)
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    Ok(made == 1)
}

/// What a task's result or message is sealed to: its id and its owner, so that neither can
/// be moved to another task or another tenant.
fn context(id: &str, owner: &str) -> Vec<u8> {
    let mut context = Vec::with_capacity(id.len() + owner.len() + 1);
    context.extend_from_slice(id.as_bytes());
    context.push(0);
    context.extend_from_slice(owner.as_bytes());
    context
}

/// Write task `id`'s end (a record already ended keeps its first end, but for a presumed
/// failure; a record the store lost is written whole again). Its result and message are
/// sealed under the operator's key, bound to the task and its owner.
pub(super) async fn finish(store: &Store, id: &str, record: &Record) -> Result<(), Unavailable> {
    let context = context(id, &record.owner);
    let seal = |text: &str| {
        store
            .seal_key()
            .seal_data(text.as_bytes(), &context)
            .map_err(|error| Unavailable {
                store: store.shown().to_owned(),
                why: format!("sealing a task's end: {error}"),
            })
    };
    let result = match &record.result {
        Some(result) => seal(&serde_json::Value::Object(result.clone()).to_string())?,
        None => String::new(),
    };
    let message = match &record.message {
        Some(message) => seal(message)?,
        None => String::new(),
    };
    let (record_key, owner_key) = (&record_key(id), &owner_key(&record.owner));
    let (result, message) = (&result, &message);
    store
        .run(|mut connection| async move {
            TASK_FINISH
                .key(record_key)
                .key(owner_key)
                .arg(status_name(record.status))
                .arg(result)
                .arg(message)
                .arg(&record.updated)
                .arg(record.ttl_ms)
                .arg(id)
                .arg(&record.owner)
                .arg(store.replica())
                .arg(&record.created)
                .invoke_async::<i64>(&mut connection)
                .await
        })
        .await
        .map(drop)
}

/// Task `id`'s record, if there is one (a running task whose replica is not heard from is
/// said so, and presumed `failed` after [`TASK_PRESUMED_LOST_AFTER`]). A result that does
/// not open under the operator's key for this task and owner is no result.
///
/// [`TASK_PRESUMED_LOST_AFTER`]: crate::state::TASK_PRESUMED_LOST_AFTER
pub(super) async fn get(store: &Store, id: &str) -> Result<Option<Record>, Unavailable> {
    let (record_key, heartbeats) = (record_key(id), Store::key("replica:"));
    let grace = millis(crate::state::TASK_PRESUMED_LOST_AFTER);
    let (record_key, heartbeats) = (&record_key, &heartbeats);
    let fields: Vec<String> = store
        .run(|mut connection| async move {
            // The owner's set is only known once the record is read: the script takes
            // the record's own owner's key from the pattern.
            let owner: Option<String> = redis::cmd("HGET")
                .arg(record_key)
                .arg("owner")
                .query_async(&mut connection)
                .await?;
            let Some(owner) = owner else {
                return Ok(Vec::new());
            };
            TASK_GET
                .key(record_key)
                .key(owner_key(&owner))
                .arg(heartbeats)
                .arg(now_rfc3339())
                .arg(millis(TASK_TTL))
                .arg(id)
                .arg(REPLICA_STOPPED)
                .arg(grace)
                .arg(REPLICA_NOT_HEARD)
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    let [owner, status, created, updated, ttl, result, message] = fields.as_slice() else {
        return Ok(None);
    };
    let context = context(id, owner);
    let opened = |text: &str| {
        store
            .seal_key()
            .open_data(text, &context)
            .and_then(|bytes| String::from_utf8(bytes).ok())
    };
    // The store's own messages (a presumed failure, a replica not heard from) are written
    // by its scripts, in the clear; a tool's are sealed.
    let message = match message.as_str() {
        "" => None,
        REPLICA_STOPPED | REPLICA_NOT_HEARD => Some(message.clone()),
        sealed => opened(sealed),
    };
    Ok(Some(Record {
        owner: owner.clone(),
        status: status_of(status),
        created: created.clone(),
        updated: updated.clone(),
        ttl_ms: ttl.parse().unwrap_or(millis(TASK_TTL)),
        result: opened(result).and_then(|text| serde_json::from_str::<JsonObject>(&text).ok()),
        message,
        input_requests: None,
        forget_at: None,
    }))
}

/// Ask for `owner`'s task `id` to stop, wherever it runs: whether there is such a task.
pub(super) async fn cancel(store: &Store, owner: &str, id: &str) -> Result<bool, Unavailable> {
    let (record_key, flag) = (record_key(id), Store::key(&format!("cancel:{id}")));
    let ttl = millis(RUNNING_TASK_TTL);
    let (record_key, flag) = (&record_key, &flag);
    let replica: Option<String> = store
        .run(|mut connection| async move {
            TASK_CANCEL
                .key(record_key)
                .key(flag)
                .arg(owner)
                .arg(ttl)
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    Ok(replica.is_some())
}

/// Which of the tasks `ids` (running here) another replica was asked to cancel.
pub(super) async fn cancellations(
    store: &Store,
    ids: &[String],
) -> Result<Vec<String>, Unavailable> {
    let keys: Vec<String> = ids
        .iter()
        .map(|id| Store::key(&format!("cancel:{id}")))
        .collect();
    let keys = &keys;
    let flags: Vec<Option<String>> = store
        .run(|mut connection| async move {
            redis::cmd("MGET")
                .arg(keys)
                .query_async(&mut connection)
                .await
        })
        .await?;
    Ok(ids
        .iter()
        .zip(flags)
        .filter(|(_, flag)| flag.is_some())
        .map(|(id, _)| id.clone())
        .collect())
}
