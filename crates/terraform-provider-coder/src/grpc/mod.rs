//! The gRPC services Terraform talks to: tfplugin6 `Provider` and go-plugin's helpers.

mod convert;
mod goplugin;
mod provider;

pub(crate) use goplugin::{Broker, Controller, Health, Stdio};
pub(crate) use provider::ProviderService;
