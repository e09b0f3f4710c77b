ALTER TABLE workspace_agents DROP COLUMN holder_epoch, DROP COLUMN holder_replica_id;
DROP TABLE replicas;
