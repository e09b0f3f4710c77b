-- The token of an agent in a build with a `coder_external_agent`, sealed with the deployment's
-- keys (as user secrets are): coderd otherwise keeps only token hashes, but an external
-- agent's owner must be able to fetch its credentials to start it on their own machine
-- (`GET /workspaces/{workspace}/external-agent/{agent}/credentials`). A table of its own, so
-- nothing that reads agents carries a token along.
CREATE TABLE workspace_agent_external_tokens (
    agent_id uuid PRIMARY KEY REFERENCES workspace_agents (id) ON DELETE CASCADE,
    sealed   text NOT NULL
);
