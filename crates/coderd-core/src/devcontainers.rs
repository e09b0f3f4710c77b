//! Dev containers: coder-rs reports the ones an agent found, and runs none. The reason is
//! here because the domain renders it into every agent's list as well as the API's routes.

/// What every dev container says, here.
pub const NOT_RUN: &str = "coder-rs does not run dev containers: starting one needs a container \
                           engine (Docker or Podman) and the Dev Containers CLI in the \
                           workspace, which this deployment does not use";
