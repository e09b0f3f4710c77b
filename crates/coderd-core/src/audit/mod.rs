//! The audit log: who did what, when, from where, and which fields it changed.
//!
//! An entry is built here ([`Entry`]) and handed to the store method that performs the audited
//! write (its `log` argument), which appends it inside the same transaction: a change is never
//! committed without its record, nor a record without its change. Events that write nothing
//! else (a refused login) are recorded on their own ([`record`]).
//!
//! Where a request came from (address, user agent, request id) is a task-local
//! [`RequestInfo`] set by the front door around each request (`coderd_http::audit_context`), so the
//! domain layer reads it without depending on HTTP; work outside a request (the lifecycle
//! executor) has none, and its entries have no actor (`user: null`).
//!
//! Recording a new kind of change is one expression at the write's call site, e.g. for a group:
//! `Entry::new(actor(&subject), ResourceType::Group, group.id, &group.name, AuditAction::Create)
//! .org(group.organization_id).diff(None, Some(&group)).build()` passed as the store method's
//! `log`, with an [`Auditable`] impl listing the group's fields.

mod diff;

use std::net::IpAddr;

use codersdk::audit::{AuditAction, ResourceType};
use uuid::Uuid;

pub use diff::{Auditable, Field, template_after};

use coderd_authz::Subject;
use coderd_store::{NewAuditLog, Store};

/// Where the current request came from.
#[derive(Debug, Clone, Default)]
pub struct RequestInfo {
    pub ip: Option<IpAddr>,
    pub user_agent: String,
    pub request_id: Uuid,
}

tokio::task_local! {
    static REQUEST: RequestInfo;
}

impl RequestInfo {
    /// The request the current task serves; empty outside one.
    pub fn current() -> Self {
        REQUEST.try_with(Clone::clone).unwrap_or_default()
    }

    /// Runs `fut` as serving this request.
    pub async fn scope<F: std::future::Future>(self, fut: F) -> F::Output {
        REQUEST.scope(self, fut).await
    }
}

/// The response header naming a request's id (Coder's).
pub const REQUEST_ID_HEADER: &str = "x-coder-request-id";

/// The actor an entry names: the subject's user, or none for coderd's own work.
pub fn actor(subject: &Subject) -> Option<Uuid> {
    (!subject.is_system()).then_some(subject.user_id)
}

/// An entry under construction; [`Entry::build`] takes the current request's origin.
#[derive(Debug, Clone)]
pub struct Entry {
    log: NewAuditLog,
}

impl Entry {
    /// A successful `action` by `user` on a resource; the status is the one the API answers
    /// such a write with (201 for creations, 200 otherwise) unless [`Entry::status`] says else.
    pub fn new(
        user: Option<Uuid>,
        resource_type: ResourceType,
        resource_id: Uuid,
        target: &str,
        action: AuditAction,
    ) -> Self {
        let status = match action {
            AuditAction::Create | AuditAction::Login | AuditAction::Register => 201,
            _ => 200,
        };
        Self {
            log: NewAuditLog {
                id: Uuid::new_v4(),
                user_id: user,
                organization_id: None,
                ip: None,
                user_agent: String::new(),
                resource_type: resource_type.as_str().into(),
                resource_id,
                resource_target: target.into(),
                action: action.as_str().into(),
                diff: serde_json::Value::Object(Default::default()),
                status_code: status,
                additional_fields: serde_json::Value::Object(Default::default()),
                request_id: Uuid::nil(),
                description: String::new(),
            },
        }
    }

    pub fn org(mut self, organization: Uuid) -> Self {
        self.log.organization_id = Some(organization);
        self
    }

    pub fn status(mut self, code: u16) -> Self {
        self.log.status_code = i32::from(code);
        self
    }

    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.log.description = text.into();
        self
    }

    /// The fields that differ between `old` and `new` (`None` before a creation and after a
    /// deletion), secrets reduced to "changed".
    pub fn diff<T: Auditable + ?Sized>(mut self, old: Option<&T>, new: Option<&T>) -> Self {
        self.log.diff = diff::diff(old, new);
        self
    }

    /// One of `additional_fields` (e.g. a build's `build_reason`).
    pub fn field(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        if let serde_json::Value::Object(map) = &mut self.log.additional_fields {
            map.insert(key.into(), value.into());
        }
        self
    }

    /// The row to store, stamped with the current request's origin (a fresh request id for
    /// work outside any request, so each background action stands alone).
    pub fn build(mut self) -> NewAuditLog {
        let origin = RequestInfo::current();
        self.log.ip = origin.ip.map(|ip| ip.to_canonical().to_string());
        self.log.user_agent = origin.user_agent;
        self.log.request_id = if origin.request_id.is_nil() {
            Uuid::new_v4()
        } else {
            origin.request_id
        };
        self.log
    }
}

/// Records an event that changes nothing else (a refused login). A failure to record is
/// logged, not returned: the caller's answer (a refusal) stands either way.
pub async fn record(store: &Store, entry: Entry) {
    if let Err(e) = store.insert_audit_log(&entry.build()).await {
        tracing::error!(error = %e, "recording an audit entry failed");
    }
}
