ALTER TABLE workspace_agents DROP COLUMN subsystems;
DROP TABLE workspace_agent_stats;
DROP TABLE workspace_agent_metadata;
DROP TABLE workspace_agent_logs;
DROP TABLE workspace_agent_scripts;
DROP TABLE workspace_agent_log_sources;
