//! Where quotas keep what their holders used: this process's ledger, or the store the
//! replicas share (`shared.rs`), behind one [`Ledger`].

#[cfg(feature = "state")]
use super::Leases;
use super::{Admission, Limiter, Refused, Reserve, admit_reserving};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Where quotas keep what their holders used: in this process (the default), or in the store
/// replicas share (`--state`), so that a quota holds once across them.
#[derive(Clone, Default)]
pub enum Ledger {
    /// In this process.
    #[default]
    Local,
    /// In the shared store, with the leases this replica holds there.
    #[cfg(feature = "state")]
    Shared(Arc<crate::state::Store>, Arc<Leases>),
}

/// Why a call was not admitted: a quota refused it, or the shared store could not be reached
/// to ask.
#[derive(Debug, Clone)]
pub enum NotAdmitted {
    /// A quota is spent.
    Refused(Refused),
    /// The shared store could not be reached: nothing it guarantees is given up.
    Unavailable(crate::state::Unavailable),
}

impl Ledger {
    /// Admit one call under every one of `limiters` (a tenant's, then its token's), reserving
    /// `reserve` (the longest it may run, the most fuel it may burn) of their daily budgets
    /// until it ends, or say why not. Nothing is taken from any limiter unless all admit.
    pub async fn admit(
        &self,
        limiters: &[&Arc<Limiter>],
        now: Instant,
        wall: SystemTime,
        reserve: Reserve,
    ) -> Result<Admission, NotAdmitted> {
        match self {
            Ledger::Local => {
                admit_reserving(limiters, 1, now, wall, reserve).map_err(NotAdmitted::Refused)
            }
            #[cfg(feature = "state")]
            Ledger::Shared(store, leases) => {
                super::shared::admit(store, leases, limiters, reserve).await
            }
        }
    }

    /// Each of `limiters`' calls in flight, and the running time (ms) and fuel used today, as
    /// the ledger keeps them (read from the store where it is shared; a holder whose store
    /// cannot be read is left out).
    pub async fn usage(
        &self,
        limiters: &[Arc<Limiter>],
        wall: SystemTime,
    ) -> Vec<(Arc<Limiter>, Usage)> {
        match self {
            Ledger::Local => limiters
                .iter()
                .map(|limiter| (Arc::clone(limiter), limiter.usage(wall)))
                .collect(),
            #[cfg(feature = "state")]
            Ledger::Shared(store, _) => super::shared::usage(store, limiters).await,
        }
    }
}

/// What a quota's holder has used: calls in flight, milliseconds and fuel today.
pub type Usage = (u32, u64, u64);
