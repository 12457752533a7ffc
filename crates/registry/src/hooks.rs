//! Write hooks: what a resource must reserve elsewhere in storage for one of its objects to be
//! written (upstream's `BeginCreate`/`BeginUpdate`/`AfterDelete` store hooks, which the
//! Service REST storage uses to allocate cluster IPs and node ports).
//!
//! The [`Store`] calls a resource's hook after validation and before the write: the hook may
//! fill server-assigned fields and reserves what they name (each reservation its own storage
//! key, made with create-if-absent, so two writes never hold the same value). A write that
//! fails or loses a race gives its reservations back ([`WriteHook::abort`]); a written or
//! deleted object lets go of what the old object held and the new one does not
//! ([`WriteHook::after_write`]). The hook lives above the registry (the apiserver's service
//! allocator); the registry knows only this trait.

use apimachinery::status::ApiError;
use serde_json::Value;

use crate::resource::ResourceDef;
use crate::store::Store;

/// The storage keys a hook created for one write, given back if the write does not happen.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub keys: Vec<String>,
}

/// A resource's write hook.
#[async_trait::async_trait]
pub trait WriteHook: Send + Sync + 'static {
    /// Fills and reserves what `new` needs beyond what `old` (the stored object, on update)
    /// already holds. On a dry run nothing is reserved, but conflicts are still reported.
    async fn before_write(
        &self,
        store: &Store,
        cluster: &str,
        old: Option<&Value>,
        new: &mut Value,
        dry_run: bool,
    ) -> Result<Reservation, ApiError>;

    /// The write did not happen: gives `reserved` back.
    async fn abort(&self, store: &Store, cluster: &str, reserved: Reservation);

    /// `old` was replaced by `new`, or deleted (`new` is `None`): releases what only `old` held.
    async fn after_write(&self, store: &Store, cluster: &str, old: &Value, new: Option<&Value>);
}

impl Store {
    fn hook(&self, res: &ResourceDef) -> Option<&dyn WriteHook> {
        self.hooks
            .iter()
            .find(|(g, p, _)| *g == res.group && *p == res.plural && !res.custom)
            .map(|(_, _, h)| &**h)
    }

    pub(crate) async fn hook_before(
        &self,
        res: &ResourceDef,
        cluster: &str,
        old: Option<&Value>,
        new: &mut Value,
        dry_run: bool,
    ) -> Result<Reservation, ApiError> {
        match self.hook(res) {
            Some(h) => h.before_write(self, cluster, old, new, dry_run).await,
            None => Ok(Reservation::default()),
        }
    }

    pub(crate) async fn hook_abort(&self, res: &ResourceDef, cluster: &str, r: Reservation) {
        if let Some(h) = self.hook(res)
            && !r.keys.is_empty()
        {
            h.abort(self, cluster, r).await;
        }
    }

    pub(crate) async fn hook_after(
        &self,
        res: &ResourceDef,
        cluster: &str,
        old: &Value,
        new: Option<&Value>,
    ) {
        if let Some(h) = self.hook(res) {
            h.after_write(self, cluster, old, new).await;
        }
    }
}
