# A workspace in a Docker container on the provisioner's Docker host, with a persistent volume
# for /home/coder. Needs the kreuzwerker/docker provider from the Terraform registry.
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
    docker = {
      source  = "kreuzwerker/docker"
      version = "~> 3.0"
    }
  }
}

variable "docker_socket" {
  type        = string
  description = "Docker daemon to use (empty: the provider's default, usually unix:///var/run/docker.sock)."
  default     = ""
}

provider "docker" {
  host = var.docker_socket != "" ? var.docker_socket : null
}

data "coder_provisioner" "me" {}
data "coder_workspace" "me" {}
data "coder_workspace_owner" "me" {}

data "coder_parameter" "image" {
  name         = "image"
  display_name = "Image"
  description  = "Container image of the workspace."
  type         = "string"
  default      = "codercom/enterprise-base:ubuntu"
  mutable      = true
  option {
    name  = "Ubuntu"
    value = "codercom/enterprise-base:ubuntu"
  }
  option {
    name  = "Debian"
    value = "debian:bookworm"
  }
}

locals {
  username  = data.coder_workspace_owner.me.name
  container = "coder-${data.coder_workspace_owner.me.name}-${lower(data.coder_workspace.me.name)}"
}

resource "coder_agent" "main" {
  arch           = data.coder_provisioner.me.arch
  os             = "linux"
  dir            = "/home/coder"
  startup_script = <<-EOT
    set -e
    # Seed the home directory from /etc/skel the first time the volume is used.
    if [ ! -f ~/.init_done ]; then
      cp -rT /etc/skel ~ || true
      touch ~/.init_done
    fi
  EOT

  env = {
    GIT_AUTHOR_NAME     = coalesce(data.coder_workspace_owner.me.full_name, local.username)
    GIT_AUTHOR_EMAIL    = data.coder_workspace_owner.me.email
    GIT_COMMITTER_NAME  = coalesce(data.coder_workspace_owner.me.full_name, local.username)
    GIT_COMMITTER_EMAIL = data.coder_workspace_owner.me.email
  }

  metadata {
    key          = "cpu"
    display_name = "CPU usage"
    script       = "coder stat cpu"
    interval     = 10
    timeout      = 1
  }
  metadata {
    key          = "memory"
    display_name = "Memory usage"
    script       = "coder stat mem"
    interval     = 10
    timeout      = 1
  }
  metadata {
    key          = "home"
    display_name = "Home disk"
    script       = "coder stat disk --path /home/coder"
    interval     = 60
    timeout      = 1
  }
}

# The home directory outlives the container: stopping a workspace removes only the container.
resource "docker_volume" "home" {
  name = "coder-${data.coder_workspace.me.id}-home"
  # A volume is never replaced: that would lose the user's files.
  lifecycle {
    ignore_changes = all
  }
  labels {
    label = "coder.owner"
    value = data.coder_workspace_owner.me.name
  }
  labels {
    label = "coder.workspace_id"
    value = data.coder_workspace.me.id
  }
}

resource "docker_image" "workspace" {
  name         = data.coder_parameter.image.value
  keep_locally = true
}

resource "docker_container" "workspace" {
  count    = data.coder_workspace.me.start_count
  image    = docker_image.workspace.image_id
  name     = local.container
  hostname = data.coder_workspace.me.name
  # The agent reaches the deployment through the Docker host: a deployment on localhost is
  # reached as host.docker.internal from inside the container.
  entrypoint = ["sh", "-c", replace(coder_agent.main.init_script, "/localhost|127\\.0\\.0\\.1/", "host.docker.internal")]
  env        = ["CODER_AGENT_TOKEN=${coder_agent.main.token}"]

  host {
    host = "host.docker.internal"
    ip   = "host-gateway"
  }

  volumes {
    container_path = "/home/coder"
    volume_name    = docker_volume.home.name
    read_only      = false
  }

  labels {
    label = "coder.owner"
    value = data.coder_workspace_owner.me.name
  }
  labels {
    label = "coder.workspace_id"
    value = data.coder_workspace.me.id
  }
}

resource "coder_metadata" "container" {
  count       = data.coder_workspace.me.start_count
  resource_id = docker_container.workspace[0].id
  item {
    key   = "image"
    value = data.coder_parameter.image.value
  }
}
