# A workspace on the provisioner's own host: a home directory that lives as long as the
# workspace, and a Coder agent that runs in it while the workspace is started.
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
  description  = "What the workspace's startup script says."
  type         = "string"
  default      = "hello"
  mutable      = true
}

locals {
  home     = "${var.workspaces_dir}/${data.coder_workspace.me.id}"
  pid_file = "${local.home}/.coder-workspace.pid"
  log_file = "${local.home}/.coder-workspace.log"
  # The agent's TMPDIR: the agent keeps its logs there, so they go when the home is removed.
  # (The init script keeps the coder binary in the home's .cache/coder, so the workspace's
  # next start downloads it only if the deployment serves a new one.)
  tmp_dir = "${local.home}/.tmp"
}

resource "coder_agent" "main" {
  os   = data.coder_provisioner.me.os
  arch = data.coder_provisioner.me.arch
  dir  = local.home
  # Through the environment rather than into the script's text: a parameter is user input.
  env = {
    GREETING = data.coder_parameter.greeting.value
  }

  startup_script = <<-EOT
    echo "$GREETING from $(hostname), workspace $CODER_WORKSPACE_NAME"
    date -u +%Y-%m-%dT%H:%M:%SZ >>.coder-starts
    echo "started $(wc -l <.coder-starts | tr -d ' ') time(s) in $PWD"
  EOT

  shutdown_script = <<-EOT
    echo "saying goodbye to $CODER_WORKSPACE_NAME"
    date -u +%Y-%m-%dT%H:%M:%SZ >.coder-last-stop
  EOT

  metadata {
    key          = "load"
    display_name = "Load average"
    script       = "uptime | sed 's/.*load average[s]*: *//'"
    interval     = 10
    timeout      = 2
  }
  metadata {
    key          = "home"
    display_name = "Home directory size"
    script       = "du -sh . | cut -f1"
    interval     = 60
    timeout      = 10
  }
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

# The agent, while the workspace is started: the agent's init script (download `coder` from
# the deployment, run `coder agent`), detached into a session of its own so it outlives
# terraform. Stopping the workspace stops the agent, then whatever is left of its session.
resource "terraform_data" "process" {
  count = data.coder_workspace.me.start_count

  input = {
    home     = terraform_data.home.output
    pid_file = local.pid_file
  }
  # Every build mints a new agent token: the agent must run with the current one.
  triggers_replace = [coder_agent.main.token]

  provisioner "local-exec" {
    command = <<-EOT
      set -e
      mkdir -p "$TMPDIR"
      cd "$HOME_DIR"
      # Terraform's CODER_* variables describe the build (the owner's session token among
      # them); the workspace gets only its agent's token.
      for var in $(env | sed -n 's/^\(CODER_[A-Za-z0-9_]*\)=.*/\1/p'); do
        [ "$var" = CODER_AGENT_TOKEN ] || unset "$var"
      done
      script="$INIT_SCRIPT" pid_file="$PID_FILE" log_file="$LOG_FILE"
      unset INIT_SCRIPT PID_FILE LOG_FILE HOME_DIR
      export HOME="$PWD"
      if command -v setsid >/dev/null 2>&1; then detach=setsid; else detach=nohup; fi
      $detach sh -c "$script" >>"$log_file" 2>&1 </dev/null &
      echo $! >"$pid_file"
    EOT
    environment = {
      HOME_DIR          = self.input.home
      PID_FILE          = self.input.pid_file
      LOG_FILE          = local.log_file
      TMPDIR            = local.tmp_dir
      INIT_SCRIPT       = coder_agent.main.init_script
      CODER_AGENT_TOKEN = coder_agent.main.token
    }
  }

  provisioner "local-exec" {
    when        = destroy
    command     = <<-EOT
      [ -f "$PID_FILE" ] || exit 0
      pid="$(cat "$PID_FILE")"
      # The agent leads its process group: on SIGTERM it stops its scripts, runs the shutdown
      # script and reports its final state to coderd before exiting. Give it up to 60 s.
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      # (A zombie has exited: its parent, which may be a pid 1 that never reaps, owns it now.)
      running() { kill -0 "$1" 2>/dev/null && ! ps -o stat= -p "$1" 2>/dev/null | grep -q '^Z'; }
      waited=0
      while running "$pid" && [ "$waited" -lt 120 ]; do
        sleep 0.5
        waited=$((waited + 1))
      done
      # Then everything left in the workspace's session: a hung agent, and what its scripts
      # started in the background (each script runs in a process group of its own).
      pkill -KILL -s "$pid" 2>/dev/null || true
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      rm -f "$PID_FILE"
    EOT
    environment = { PID_FILE = self.input.pid_file }
  }
}
