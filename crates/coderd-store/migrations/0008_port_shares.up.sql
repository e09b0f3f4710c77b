-- Ports of a workspace's agent shared beyond its owner (Coder's port sharing); a port without
-- a row is owner-only. Agents are named, not referenced by id: a share outlives rebuilds, which
-- mint new agents under the same name.
CREATE TABLE workspace_agent_port_shares (
    workspace_id uuid    NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    agent_name   text    NOT NULL,
    port         integer NOT NULL CHECK (port BETWEEN 9 AND 65535),
    share_level  text    NOT NULL
        CHECK (share_level IN ('owner', 'authenticated', 'organization', 'public')),
    protocol     text    NOT NULL DEFAULT 'http' CHECK (protocol IN ('http', 'https')),
    PRIMARY KEY (workspace_id, agent_name, port)
);
