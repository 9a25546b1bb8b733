//! The calls running now ([`Running`]): how shutdown waits for them and stops the rest, and
//! how a client's `notifications/cancelled` finds its own call; and the front's side of each
//! call the shared handler runs ([`HttpCall`]).

use crate::front::FromFront;
use crate::http::metrics::Metrics;
use crate::http::quota::Admission;
use crate::http::share::Place;
use crate::http::tenant::Tenant;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use toolcell::{CallContext, CallReport, Runtime, StopToken};

/// The calls running now, so shutdown can wait for them and stop the rest.
#[derive(Default)]
pub(crate) struct Running {
    next: AtomicU64,
    /// Each call's client and request id (how a `notifications/cancelled` names it), and what
    /// stops it.
    calls: Mutex<HashMap<u64, (CallKey, StopToken)>>,
    idle: tokio::sync::Notify,
}

/// Which client made a call, and the JSON-RPC id it gave it: a client can cancel its own
/// calls only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallKey {
    /// The client as the front counts it (a tenant, or a peer address).
    pub(crate) client: String,
    pub(crate) request: String,
}

impl Running {
    /// Note a call that `stop` stops; it is forgotten when the guard drops.
    pub(crate) fn enter(self: &Arc<Self>, key: CallKey, stop: StopToken) -> RunningGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (key, stop));
        RunningGuard {
            running: Arc::clone(self),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (CallKey, StopToken)>> {
        toolcell::sync::lock(&self.calls)
    }

    pub(super) fn count(&self) -> usize {
        self.lock().len()
    }

    pub(super) fn stop_all(&self) {
        for (_, stop) in self.lock().values() {
            stop.stop();
        }
    }

    /// Stop the calls `key` names (a client's request id); how many there were.
    pub(super) fn stop(&self, key: &CallKey) -> usize {
        let calls = self.lock();
        let mut stopped = 0;
        for (_, stop) in calls.values().filter(|(call, _)| call == key) {
            stop.stop();
            stopped += 1;
        }
        stopped
    }

    pub(super) async fn until_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// The front's side of one call served over HTTP, handed to the shared call handler
/// ([`FromFront`]): the client it is counted under and the tenant it runs as; its place in its
/// client's share of the pool and its quota admission, held until it ends (as a task too)
/// and charged with what it used; where it is registered and counted; and in the
/// `initialize` era, the session its id opened and the route its questions' answers take.
pub(crate) struct HttpCall {
    pub(crate) client: String,
    pub(crate) tenant: Option<Arc<Tenant>>,
    pub(crate) admission: Option<Admission>,
    /// Held, never read: dropped with the call, it gives the place back.
    pub(crate) _share: Option<Place<String>>,
    pub(crate) running: Arc<Running>,
    pub(crate) metrics: Arc<Metrics>,
    /// The session the request's id opened (`initialize` era), if any.
    pub(crate) session: Option<crate::http::session::Session>,
    /// The log level that session set, looked up for a call.
    pub(crate) session_level: Option<toolcell::client::LogLevel>,
    /// Where the answers to the call's questions come back, for a client that can be asked.
    pub(crate) route: Option<Arc<crate::http::questions::Route>>,
    /// Where sessions' levels are kept.
    pub(crate) levels: Arc<crate::http::session::Levels>,
}

impl FromFront for HttpCall {
    fn session_capabilities(&self) -> Option<rmcp::model::ClientCapabilities> {
        self.session
            .as_ref()
            .map(|session| session.capabilities.clone())
    }

    fn session_level(&self) -> Option<toolcell::client::LogLevel> {
        self.session_level
    }

    fn set_session_level(
        &self,
        level: toolcell::client::LogLevel,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(async move {
            match &self.session {
                Some(session) => self.levels.set(session, level).await,
                None => Ok(()),
            }
        })
    }

    fn answers(&self) -> Option<Arc<dyn crate::asking::AnswerRoute>> {
        self.route
            .as_ref()
            .map(|route| Arc::clone(route) as Arc<dyn crate::asking::AnswerRoute>)
    }

    fn client(&self) -> &str {
        &self.client
    }

    fn context(&self) -> Option<&CallContext> {
        self.tenant.as_ref().map(|tenant| &tenant.context)
    }

    fn enter(&self, request: &str, stop: StopToken) -> Box<dyn Send + Sync> {
        let key = CallKey {
            client: self.client.clone(),
            request: request.to_owned(),
        };
        Box::new(self.running.enter(key, stop))
    }

    /// Charge the quotas that admitted the call (giving its in-flight places back before its
    /// answer leaves, where a quota bounds them: a client that sends its next call on
    /// receiving this one's answer finds its place free, on any replica), and count it.
    fn ended<'a>(
        &'a self,
        runtime: &'a Runtime,
        report: &'a CallReport,
        started: Instant,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if let Some(admission) = &self.admission {
                admission
                    .finish(report.elapsed, report.cost.fuel, SystemTime::now())
                    .await;
            }
            self.metrics
                .call(runtime, &report.tool, &report.response, started.elapsed());
        })
    }
}

/// Forgets its call when dropped.
pub(crate) struct RunningGuard {
    running: Arc<Running>,
    id: u64,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut calls = self.running.lock();
        calls.remove(&self.id);
        if calls.is_empty() {
            self.running.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_stops_only_the_calls_of_its_own_client() {
        let running = Arc::new(Running::default());
        let key = |client: &str, request: &str| CallKey {
            client: client.to_owned(),
            request: request.to_owned(),
        };
        let (a, b) = (StopToken::new(), StopToken::new());
        let _a = running.enter(key("tenant:a", "7"), a.clone());
        let _b = running.enter(key("tenant:b", "7"), b.clone());
        assert_eq!(running.stop(&key("tenant:c", "7")), 0);
        assert_eq!(running.stop(&key("tenant:a", "8")), 0);
        assert!(!a.is_stopped() && !b.is_stopped());
        assert_eq!(running.stop(&key("tenant:b", "7")), 1);
        assert!(!a.is_stopped() && b.is_stopped());
    }
}
