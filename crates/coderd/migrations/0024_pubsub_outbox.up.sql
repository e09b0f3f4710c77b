-- A transactional outbox for pubsub messages (see coderd's pubsub.rs). A transaction that
-- NOTIFYs holds PostgreSQL's database-wide NOTIFY lock from pre-commit until it has ended, i.e.
-- across its commit record's fsync, so notifying transactions commit one at a time. Hot paths
-- insert their messages here instead (rows of concurrent transactions share fsyncs) and a relay
-- in each coderd moves committed rows to pg_notify, many per transaction.
CREATE TABLE pubsub_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel text NOT NULL,
    payload text NOT NULL
);

-- Thousands of rows a second are inserted and deleted while the table stays near empty:
-- vacuum it after a few hundred dead rows rather than after 20 % of its (tiny) size plus 50,
-- and without cost-based sleeps, so the relay's index scan does not walk dead tuples.
ALTER TABLE pubsub_outbox SET (
    autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 500,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_threshold = 1000,
    autovacuum_analyze_scale_factor = 0
);

-- Publishes a message once the calling transaction commits: the drop-in replacement for
-- pg_notify(channel, payload) at the call sites that go through the outbox. It returns 1, not
-- void: a SQL function's void result is NULL, and call sites count the messages they sent.
CREATE FUNCTION coder_publish(channel text, payload text) RETURNS int
LANGUAGE sql VOLATILE AS $$
    INSERT INTO pubsub_outbox (channel, payload) VALUES (channel, payload) RETURNING 1
$$;

-- Moves up to `batch` committed messages, oldest first, to pg_notify in one transaction;
-- returns how many. The transaction-level advisory lock serialises relays of all replicas, so
-- one transaction's messages (consecutive ids) are never split across two relays that could
-- commit out of order. The DELETE is a statement after the lock, so in READ COMMITTED its
-- snapshot sees every row committed before the lock was granted (none already relayed).
-- `id = ANY (ARRAY(...))` keeps both the pick and the delete on the primary key (`id IN
-- (subquery)` became a hash join over a sequential scan of the table, dead rows included).
-- pg_notify is called over the deleted rows sorted by id: a sorted subquery is not flattened,
-- so the calls happen in that order.
CREATE FUNCTION coder_relay_outbox(batch int) RETURNS int
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    sent int;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('coder_relay_outbox'));
    WITH gone AS (
        DELETE FROM pubsub_outbox
        WHERE id = ANY (ARRAY(SELECT id FROM pubsub_outbox ORDER BY id LIMIT batch))
        RETURNING id, channel, payload
    )
    SELECT count(n.note) INTO sent
    FROM (SELECT pg_notify(o.channel, o.payload) AS note
          FROM (SELECT * FROM gone ORDER BY id) o) n;
    RETURN sent;
END
$$;
