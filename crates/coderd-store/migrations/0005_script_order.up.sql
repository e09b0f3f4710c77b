-- Script ordering (`coder_script_order`) and dev containers (`coder_devcontainer`): what the
-- agent needs in its manifest to wait for prerequisites and to report on dev containers.

ALTER TABLE workspace_agent_scripts
    -- Terraform address of the coder_script; empty for an agent's legacy scripts.
    ADD COLUMN resource_address text  NOT NULL DEFAULT '',
    -- [{"prerequisite_resource_address": ..., "requirement": "success" | "completion"}]
    ADD COLUMN dependencies     jsonb NOT NULL DEFAULT '[]';

CREATE TABLE workspace_agent_devcontainers (
    id               uuid        PRIMARY KEY,
    agent_id         uuid        NOT NULL REFERENCES workspace_agents (id) ON DELETE CASCADE,
    -- Where the agent reports on the container (starting it, or why it cannot).
    log_source_id    uuid        NOT NULL REFERENCES workspace_agent_log_sources (id) ON DELETE CASCADE,
    name             text        NOT NULL,
    workspace_folder text        NOT NULL,
    config_path      text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL
);
CREATE INDEX workspace_agent_devcontainers_agent ON workspace_agent_devcontainers (agent_id);
