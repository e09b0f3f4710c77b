# A tour of what a template can declare for Coder: parameters of every type with validation,
# an agent with metadata, apps, a script and environment variables, and resource metadata.
# Only terraform's built-in resources stand in for infrastructure, so it runs offline.
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}

data "coder_workspace" "me" {}
data "coder_workspace_owner" "me" {}

data "coder_parameter" "region" {
  name         = "region"
  display_name = "Region"
  description  = "Where the workspace runs. Fixed once the workspace exists."
  type         = "string"
  default      = "eu-west"
  mutable      = false
  order        = 1
  option {
    name  = "Europe (West)"
    value = "eu-west"
    icon  = "/emojis/1f1ea-1f1fa.png"
  }
  option {
    name  = "United States (East)"
    value = "us-east"
    icon  = "/emojis/1f1fa-1f1f8.png"
  }
}

data "coder_parameter" "cpus" {
  name         = "cpus"
  display_name = "CPUs"
  type         = "number"
  default      = "2"
  mutable      = true
  order        = 2
  validation {
    min = 1
    max = 8
  }
}

data "coder_parameter" "disk_gb" {
  name         = "disk_gb"
  display_name = "Home disk (GB)"
  description  = "Disks only grow."
  type         = "number"
  default      = "10"
  mutable      = true
  order        = 3
  validation {
    min       = 10
    max       = 100
    monotonic = "increasing"
  }
}

data "coder_parameter" "dotfiles_repo" {
  name         = "dotfiles_repo"
  display_name = "Dotfiles repository"
  type         = "string"
  default      = ""
  mutable      = true
  order        = 4
  validation {
    regex = "^$|^https://"
    error = "Use an https:// URL, or leave it empty."
  }
}

data "coder_parameter" "jupyter" {
  name         = "jupyter"
  display_name = "Jupyter"
  description  = "Add a Jupyter app."
  type         = "bool"
  default      = "false"
  mutable      = true
  order        = 5
}

data "coder_parameter" "extensions" {
  name         = "extensions"
  display_name = "Editor extensions"
  type         = "list(string)"
  default      = jsonencode(["ms-python.python"])
  mutable      = true
  order        = 6
}

locals {
  region     = data.coder_parameter.region.value
  cpus       = tonumber(data.coder_parameter.cpus.value)
  jupyter    = tobool(data.coder_parameter.jupyter.value)
  extensions = jsondecode(data.coder_parameter.extensions.value)
}

resource "coder_agent" "dev" {
  os   = "linux"
  arch = "amd64"
  dir  = "/home/coder"
  env = {
    REGION     = local.region
    EXTENSIONS = join(",", local.extensions)
  }

  metadata {
    key          = "load"
    display_name = "Load average"
    script       = "cut -d' ' -f1 /proc/loadavg"
    interval     = 10
    timeout      = 1
  }
  metadata {
    key          = "home"
    display_name = "Home disk"
    script       = "df -h /home/coder | tail -1 | awk '{print $3 \"/\" $2}'"
    interval     = 60
    timeout      = 5
  }

  display_apps {
    vscode                 = true
    vscode_insiders        = false
    web_terminal           = true
    ssh_helper             = true
    port_forwarding_helper = false
  }
}

resource "coder_script" "dotfiles" {
  agent_id           = coder_agent.dev.id
  display_name       = "Dotfiles"
  icon               = "/icon/dotfiles.svg"
  run_on_start       = true
  start_blocks_login = false
  script             = <<-EOT
    if [ -n "${data.coder_parameter.dotfiles_repo.value}" ]; then
      coder dotfiles -y "${data.coder_parameter.dotfiles_repo.value}"
    fi
  EOT
}

resource "coder_env" "editor" {
  agent_id = coder_agent.dev.id
  name     = "EDITOR"
  value    = "vim"
}

resource "coder_app" "code_server" {
  agent_id     = coder_agent.dev.id
  slug         = "code-server"
  display_name = "VS Code in the browser"
  icon         = "/icon/code.svg"
  url          = "http://localhost:13337/?folder=/home/coder"
  subdomain    = false
  share        = "owner"
  order        = 1

  healthcheck {
    url       = "http://localhost:13337/healthz"
    interval  = 5
    threshold = 6
  }
}

resource "coder_app" "jupyter" {
  count        = local.jupyter ? 1 : 0
  agent_id     = coder_agent.dev.id
  slug         = "jupyter"
  display_name = "Jupyter"
  icon         = "/icon/jupyter.svg"
  url          = "http://localhost:8888"
  order        = 2
}

resource "coder_app" "docs" {
  agent_id     = coder_agent.dev.id
  slug         = "docs"
  display_name = "Coder docs"
  url          = "https://coder.com/docs"
  external     = true
  order        = 3
}

# Stands in for the workspace's machine: exists while the workspace runs, hosts the agent.
resource "terraform_data" "machine" {
  count = data.coder_workspace.me.start_count
  input = {
    agent  = coder_agent.dev.id
    region = local.region
    cpus   = local.cpus
  }
}

resource "coder_metadata" "machine" {
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.machine[0].id
  icon        = "/icon/memory.svg"
  daily_cost  = 5 * local.cpus
  item {
    key   = "region"
    value = local.region
  }
  item {
    key   = "cpus"
    value = local.cpus
  }
  item {
    key       = "owner"
    value     = data.coder_workspace_owner.me.email
    sensitive = true
  }
}

# Stands in for the home disk: kept while the workspace is stopped.
resource "terraform_data" "home_disk" {
  input = {
    size_gb = data.coder_parameter.disk_gb.value
  }
}

resource "coder_metadata" "home_disk" {
  resource_id = terraform_data.home_disk.id
  hide        = false
  item {
    key   = "size"
    value = "${data.coder_parameter.disk_gb.value} GB"
  }
}
