//! coderd's executors: the background work every replica runs on the core, each deciding
//! through the domain layer as the system subject, never through a front door. The lifecycle
//! executor ([`lifecycle`]: autostart, autostop, dormancy, deletion), the prebuilds reconciler
//! ([`prebuilds`]) and the audit log's retention ([`audit_retention`]). Work that must happen
//! once across replicas takes a database lock first, so any number of replicas may run them.

pub mod audit_retention;
pub mod lifecycle;
pub mod prebuilds;
