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
