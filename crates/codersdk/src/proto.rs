//! Results a provisioner engine returns to coderd: resources, agents, apps, parameters.
