ALTER TABLE workspace_agent_devcontainers DROP COLUMN subagent_id;

-- Sub-agents only exist as children: without the column they would pass for agents of their
-- resource.
DELETE FROM workspace_agents WHERE parent_id IS NOT NULL;
DROP INDEX workspace_agents_parent;
ALTER TABLE workspace_agents DROP COLUMN parent_id;
