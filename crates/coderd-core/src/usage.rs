//! Template usage (`active_user_count`), computed for all templates in one grouped query every
//! [`REFRESH`] instead of per template read: a count over a template's workspaces on every read
//! cost as much as the rest of the request at a few thousand workspaces.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_store::Store;

pub const REFRESH: Duration = Duration::from_secs(30);

#[derive(Clone, Default)]
pub struct TemplateUsage {
    users: Arc<RwLock<HashMap<Uuid, i64>>>,
}

impl TemplateUsage {
    pub fn start(store: Store, shutdown: CancellationToken) -> Self {
        let usage = Self::default();
        let this = usage.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(REFRESH);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                match store.template_active_users().await {
                    Ok(counts) => *this.users.write().unwrap_or_else(|e| e.into_inner()) = counts,
                    Err(e) => tracing::warn!(error = %e, "refreshing template usage"),
                }
            }
        });
        usage
    }

    /// Users with workspaces of `template`, as of the last refresh.
    pub fn active_users(&self, template: Uuid) -> i64 {
        self.users
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&template)
            .copied()
            .unwrap_or(0)
    }
}
