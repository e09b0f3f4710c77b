DROP TABLE workspace_agent_devcontainers;

ALTER TABLE workspace_agent_scripts
    DROP COLUMN dependencies,
    DROP COLUMN resource_address;
