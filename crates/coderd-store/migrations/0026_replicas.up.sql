-- The coderd replicas sharing this database, as Coder's replicas table: each process writes
-- its row at startup and beats every 2 s; a replica is alive while its row was updated less
-- than 6 s ago by the database's clock (never the replicas' own clocks).
CREATE TABLE replicas (
    id uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    hostname text NOT NULL,
    region_id integer NOT NULL DEFAULT 0,
    -- The replica's own internal URL, where its peers reach its relay.
    relay_address text NOT NULL,
    -- Microseconds a `SELECT 1` took at the last beat.
    database_latency integer NOT NULL DEFAULT 0,
    version text NOT NULL,
    -- Why peers could not be reached at the last beat, or empty.
    error text NOT NULL DEFAULT ''
);

CREATE INDEX replicas_updated_at ON replicas (updated_at);

-- Which replica holds each agent's connection, and since which connection: every connection
-- takes the next epoch, so a newer connection (on any replica) wins and the older holder,
-- seeing a later epoch, closes its copy; only the current holder may record the agent gone.
ALTER TABLE workspace_agents
    ADD COLUMN holder_replica_id uuid,
    ADD COLUMN holder_epoch bigint NOT NULL DEFAULT 0;
