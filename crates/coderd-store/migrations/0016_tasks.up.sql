-- Coder's Tasks: a prompt given to an AI agent, run in a workspace of a template version with
-- a `coder_ai_task`. The task row is what the tasks API names (its own id and name); the
-- workspace does the work and carries the authorisation (a task is seen by whoever may see its
-- workspace). The row is written in the transaction that creates the workspace, so the first
-- build's job already finds its prompt. A task whose workspace is deleted is gone with it.
CREATE TABLE tasks (
    id                  uuid        PRIMARY KEY,
    organization_id     uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    owner_id            uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name                text        NOT NULL,
    display_name        text        NOT NULL DEFAULT '',
    workspace_id        uuid        REFERENCES workspaces (id) ON DELETE CASCADE,
    template_version_id uuid        NOT NULL REFERENCES template_versions (id) ON DELETE CASCADE,
    template_parameters jsonb       NOT NULL DEFAULT '{}'::jsonb,
    prompt              text        NOT NULL,
    created_at          timestamptz NOT NULL,
    deleted_at          timestamptz
);
CREATE INDEX tasks_owner ON tasks (owner_id) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX tasks_workspace ON tasks (workspace_id) WHERE deleted_at IS NULL;
