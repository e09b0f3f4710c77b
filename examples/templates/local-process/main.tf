# A workspace on the provisioner's own host: a home directory that lives as long as the
# workspace, and a process that runs while the workspace is started.
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}

variable "workspaces_dir" {
  type        = string
  description = "Directory on the provisioner host holding every workspace's home directory."
  default     = "/tmp/coder-workspaces"
}

data "coder_provisioner" "me" {}
data "coder_workspace" "me" {}
data "coder_workspace_owner" "me" {}

data "coder_parameter" "greeting" {
  name         = "greeting"
  display_name = "Greeting"
  description  = "What the workspace process says when it starts."
  type         = "string"
  default      = "hello"
  mutable      = true
}

locals {
  home     = "${var.workspaces_dir}/${data.coder_workspace.me.id}"
  pid_file = "${local.home}/.coder-workspace.pid"
  log_file = "${local.home}/.coder-workspace.log"

  # What runs while the workspace is started, in its home directory, with CODER_AGENT_TOKEN and
  # CODER_AGENT_URL set. For now a stand-in that says hello and waits; to run the real agent,
  # make this coder_agent.main.init_script (it downloads `coder` from the deployment and runs
  # `coder agent`).
  workspace_command = <<-EOT
    echo "$GREETING from $(hostname): agent of $CODER_AGENT_URL, token $${CODER_AGENT_TOKEN:+received}"
    while :; do sleep 60; done
  EOT
}

resource "coder_agent" "main" {
  os   = data.coder_provisioner.me.os
  arch = data.coder_provisioner.me.arch
  dir  = local.home
}

resource "coder_app" "log" {
  agent_id     = coder_agent.main.id
  slug         = "workspace-log"
  display_name = "Workspace log"
  command      = "tail -f ${local.log_file}"
}

# The home directory: created by the first start, kept while the workspace is stopped, removed
# when the workspace is deleted.
resource "terraform_data" "home" {
  input = local.home

  provisioner "local-exec" {
    command     = "mkdir -p \"$HOME_DIR\""
    environment = { HOME_DIR = self.input }
  }

  provisioner "local-exec" {
    when        = destroy
    command     = <<-EOT
      case "$HOME_DIR" in
        /?*/?*) rm -rf -- "$HOME_DIR" ;;
        *) echo "refusing to remove '$HOME_DIR'" >&2; exit 1 ;;
      esac
    EOT
    environment = { HOME_DIR = self.input }
  }
}

resource "coder_metadata" "home" {
  resource_id = terraform_data.home.id
  icon        = "/icon/folder.svg"
  item {
    key   = "path"
    value = local.home
  }
}

# The workspace process, while the workspace is started. It is detached into a session of its
# own, so it outlives terraform; stopping the workspace stops its whole process group.
resource "terraform_data" "process" {
  count = data.coder_workspace.me.start_count

  input = {
    home     = terraform_data.home.output
    pid_file = local.pid_file
  }
  # Every build mints a new agent token: the process must run with the current one.
  triggers_replace = [coder_agent.main.token]

  provisioner "local-exec" {
    command = <<-EOT
      cd "$HOME_DIR"
      if command -v setsid >/dev/null 2>&1; then detach=setsid; else detach=nohup; fi
      $detach sh -c "$WORKSPACE_COMMAND" >>"$LOG_FILE" 2>&1 </dev/null &
      echo $! >"$PID_FILE"
    EOT
    environment = {
      HOME_DIR          = self.input.home
      PID_FILE          = self.input.pid_file
      LOG_FILE          = local.log_file
      WORKSPACE_COMMAND = local.workspace_command
      GREETING          = data.coder_parameter.greeting.value
      CODER_AGENT_TOKEN = coder_agent.main.token
      CODER_AGENT_URL   = data.coder_workspace.me.access_url
    }
  }

  provisioner "local-exec" {
    when        = destroy
    command     = <<-EOT
      [ -f "$PID_FILE" ] || exit 0
      pid="$(cat "$PID_FILE")"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
      done
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      rm -f "$PID_FILE"
    EOT
    environment = { PID_FILE = self.input.pid_file }
  }
}
