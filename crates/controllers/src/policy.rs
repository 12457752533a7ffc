//! The cluster-policy controllers and their settings, built together so the manager needs
//! one line each: [`resourcequota`](crate::resourcequota),
//! [`nodelifecycle`](crate::nodelifecycle), [`disruption`](crate::disruption),
//! [`volumebinding`](crate::volumebinding).

use std::sync::Arc;
use std::time::Duration;

use crate::disruption::DisruptionController;
use crate::nodelifecycle::{self, NodeLifecycleController};
use crate::resourcequota::{self, ResourceQuotaController};
use crate::volumebinding::VolumeBindingController;
use runtime::error::Result;
use runtime::shared::Informers;

/// Durations of the policy controllers; tests shorten them.
#[derive(Clone, Debug)]
pub struct PolicyOptions {
    /// How often every quota is recounted (upstream `--resource-quota-sync-period`, 5 min).
    pub quota_resync: Duration,
    /// How long a node may go without renewing its Lease before it is Unknown (upstream
    /// `--node-monitor-grace-period`, 40 s).
    pub node_grace: Duration,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            quota_resync: resourcequota::DEFAULT_RESYNC,
            node_grace: nodelifecycle::DEFAULT_GRACE,
        }
    }
}

/// The policy controllers.
pub struct Controllers {
    pub quota: Arc<ResourceQuotaController>,
    pub nodes: Arc<NodeLifecycleController>,
    pub disruption: Arc<DisruptionController>,
    pub volumes: Arc<VolumeBindingController>,
}

impl Controllers {
    pub fn new(informers: &Informers, options: &PolicyOptions) -> Result<Self> {
        Ok(Controllers {
            quota: ResourceQuotaController::new(informers, options.quota_resync)?,
            nodes: NodeLifecycleController::new(informers, options.node_grace)?,
            disruption: DisruptionController::new(informers)?,
            volumes: VolumeBindingController::new(informers)?,
        })
    }
}
