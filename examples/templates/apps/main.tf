# The `local-process` workspace (a home directory on the provisioner's host and an agent that
# runs there) with a web app inside: the agent's startup script starts server.py, and
# `coder_app`s open it through coderd's app proxy — on a path, on a subdomain, and shared at
# each level.
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

data "coder_parameter" "port" {
  name         = "port"
  display_name = "App port"
  description  = "Port the workspace's web app listens on (on the workspace's loopback)."
  type         = "number"
  default      = "8765"
}

locals {
  home     = "${var.workspaces_dir}/${data.coder_workspace.me.id}"
  pid_file = "${local.home}/.coder-workspace.pid"
  log_file = "${local.home}/.coder-workspace.log"
  tmp_dir  = "${local.home}/.tmp"
  app      = "http://localhost:${data.coder_parameter.port.value}"
}

resource "coder_agent" "main" {
  os   = data.coder_provisioner.me.os
  arch = data.coder_provisioner.me.arch
  dir  = local.home
  env = {
    APP_PORT      = data.coder_parameter.port.value
    APP_SERVER_PY = file("${path.module}/server.py")
  }

  # The app runs in the workspace's session, so stopping the workspace stops it too.
  startup_script = <<-EOT
    printf '%s\n' "$APP_SERVER_PY" >.app-server.py
    nohup python3 .app-server.py "$APP_PORT" >.app-server.log 2>&1 </dev/null &
    echo "web app started on port $APP_PORT"
  EOT
}

resource "coder_app" "web" {
  agent_id     = coder_agent.main.id
  slug         = "web"
  display_name = "Web app"
  url          = local.app
  share        = "owner"

  healthcheck {
    url       = "${local.app}/healthz"
    interval  = 2
    threshold = 5
  }
}

resource "coder_app" "members" {
  agent_id     = coder_agent.main.id
  slug         = "members"
  display_name = "Web app (signed-in users)"
  url          = local.app
  share        = "authenticated"
}

resource "coder_app" "public" {
  agent_id     = coder_agent.main.id
  slug         = "public"
  display_name = "Web app (public)"
  url          = local.app
  share        = "public"
}

resource "coder_app" "sub" {
  agent_id     = coder_agent.main.id
  slug         = "sub"
  display_name = "Web app (subdomain)"
  url          = local.app
  subdomain    = true
  share        = "owner"
}

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
