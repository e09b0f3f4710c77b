-- Dev containers' sub-agents, as Coder records them: a `coder_devcontainer` gets an agent of its
-- own under the agent that runs the container (same resource), and the devcontainer row points
-- at it. Deleting the parent deletes its sub-agents; deleting a sub-agent leaves the container.

ALTER TABLE workspace_agents
    ADD COLUMN parent_id uuid REFERENCES workspace_agents (id) ON DELETE CASCADE;
CREATE INDEX workspace_agents_parent ON workspace_agents (parent_id) WHERE parent_id IS NOT NULL;

ALTER TABLE workspace_agent_devcontainers
    ADD COLUMN subagent_id uuid REFERENCES workspace_agents (id) ON DELETE SET NULL;
