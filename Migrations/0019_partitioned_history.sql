-- The history (notifications and deliveries) partitioned by id range, a range per period of days,
-- so that retention drops whole partitions instead of deleting rows (docs/operations.md#retention).
--
-- Ids carry their day: the partition that starts on day D (days since 1970-01-01, UTC) starts at id
-- D << 32, and the retention lease holder sets each id sequence to the start of the partition that
-- covers today (push_relay_extend_history). A row's id is therefore allocated in the partition of
-- the period it was stored in, or in the newest partition when none covers today yet: intake never
-- needs a partition that is missing. Ids stay below 2^53, so JSON readers keep them exact.
--
-- The tables as they were become one partition each (`*_unpartitioned`, every id below today's
-- start), kept and pruned row by row until their rows expire. Attaching reads each once (the
-- partition bound is checked); nothing is rewritten.

-- The first id of day `day`'s range.
CREATE FUNCTION push_relay_history_bound(day date) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT (day - date '1970-01-01')::bigint << 32 $$;

-- The range partitions of the history tables, their id bounds (NULL: MINVALUE), and whether a
-- detach (retention's DETACH PARTITION ... CONCURRENTLY) was interrupted and must be finalised.
CREATE VIEW history_partitions AS
SELECT parent.relname::text AS parent, child.relname::text AS partition, child.oid AS relid,
       nullif(substring(pg_get_expr(child.relpartbound, child.oid) FROM 'FROM \(''?([-0-9A-Z]+)''?\)'), 'MINVALUE')::bigint AS lower,
       substring(pg_get_expr(child.relpartbound, child.oid) FROM 'TO \(''?([-0-9]+)''?\)')::bigint AS upper,
       i.inhdetachpending AS detaching
FROM pg_inherits i
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_class child ON child.oid = i.inhrelid
WHERE parent.relname IN ('notifications', 'deliveries') AND parent.relnamespace = 'public'::regnamespace;

-- --- notifications ----------------------------------------------------------------------------------
ALTER TABLE notifications RENAME TO notifications_unpartitioned;
ALTER INDEX notifications_pkey RENAME TO notifications_unpartitioned_pkey;
ALTER INDEX notifications_by_ticket_id RENAME TO notifications_unpartitioned_by_ticket_id;
ALTER INDEX notifications_text_kept RENAME TO notifications_unpartitioned_text_kept;
ALTER TABLE notifications_unpartitioned ALTER COLUMN id DROP IDENTITY;

CREATE SEQUENCE notifications_id_seq;
CREATE TABLE notifications (
    id          bigint      NOT NULL DEFAULT nextval('notifications_id_seq'),
    app_id      text        NOT NULL,
    ticket_id   text        NOT NULL,
    title       text,
    body        text,
    request_id  text,
    received_at timestamptz NOT NULL DEFAULT now(),
    content     text        NOT NULL DEFAULT 'full',
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
ALTER SEQUENCE notifications_id_seq OWNED BY notifications.id;
CREATE INDEX notifications_by_ticket_id ON notifications (app_id, ticket_id, id);
CREATE INDEX notifications_text_kept ON notifications (id) WHERE content = 'encrypted' AND title IS NOT NULL;
ALTER TABLE notifications ATTACH PARTITION notifications_unpartitioned
    FOR VALUES FROM (MINVALUE) TO (push_relay_history_bound((now() AT TIME ZONE 'UTC')::date));

-- --- deliveries -------------------------------------------------------------------------------------
ALTER TABLE deliveries RENAME TO deliveries_unpartitioned;
ALTER INDEX deliveries_pkey RENAME TO deliveries_unpartitioned_pkey;
ALTER INDEX deliveries_due RENAME TO deliveries_unpartitioned_due;
ALTER INDEX deliveries_unswept RENAME TO deliveries_unpartitioned_unswept;
ALTER INDEX deliveries_by_notification RENAME TO deliveries_unpartitioned_by_notification;
ALTER INDEX deliveries_by_device_hash RENAME TO deliveries_unpartitioned_by_device_hash;
ALTER TABLE deliveries_unpartitioned ALTER COLUMN id DROP IDENTITY;

CREATE SEQUENCE deliveries_id_seq;
CREATE TABLE deliveries (
    id               bigint      NOT NULL DEFAULT nextval('deliveries_id_seq'),
    notification_id  bigint,
    app_id           text        NOT NULL,
    device_token     text        NOT NULL,
    platform         text        NOT NULL CONSTRAINT deliveries_platform_check CHECK (platform IN ('ios', 'android')),
    kind             text        NOT NULL DEFAULT 'alert' CONSTRAINT deliveries_kind_check CHECK (kind IN ('alert', 'badge_sync')),
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    provider_id      text,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    due              boolean     NOT NULL DEFAULT false,
    CONSTRAINT deliveries_alert_has_notification CHECK (kind <> 'alert' OR notification_id IS NOT NULL),
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
ALTER SEQUENCE deliveries_id_seq OWNED BY deliveries.id;
CREATE INDEX deliveries_due ON deliveries (app_id, next_attempt_at) WHERE due;
CREATE INDEX deliveries_unswept ON deliveries (next_attempt_at, id) WHERE NOT due;
CREATE INDEX deliveries_by_notification ON deliveries (notification_id);
CREATE INDEX deliveries_by_device_hash ON deliveries (app_id, hashtextextended(device_token, 0), id);
ALTER TABLE deliveries ATTACH PARTITION deliveries_unpartitioned
    FOR VALUES FROM (MINVALUE) TO (push_relay_history_bound((now() AT TIME ZONE 'UTC')::date));

-- --- Partitions ahead ------------------------------------------------------------------------------
-- Creates the partitions of both tables, `period_days` days each, from the end of the newest one
-- (or from today, when that is earlier or there is none) until one covers `through`; then sets
-- each id sequence to the start of the partition covering today, if it is behind. Returns how many
-- partitions it created. A status or content check the unpartitioned tables hold unvalidated is a
-- check of each new partition (a partitioned table's checks must be valid on every partition).
--
-- Nothing here makes intake wait: a partition is made as a table of its own and then attached,
-- which takes SHARE UPDATE EXCLUSIVE on the parent (CREATE TABLE ... PARTITION OF would take
-- ACCESS EXCLUSIVE, queueing every insert behind the longest running statement). Callers that
-- run at once are serialised by an advisory lock, not by a lock on the tables.
CREATE FUNCTION push_relay_extend_history(period_days int, through date) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    tab text;
    part text;
    hi bigint;
    first date;
    made int := 0;
    current_start bigint;
BEGIN
    IF period_days < 1 THEN
        RAISE EXCEPTION 'period_days must be at least 1, not %', period_days;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('push_relay_extend_history', 19));
    FOREACH tab IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
        SELECT max(upper) INTO hi FROM history_partitions WHERE parent = tab AND lower IS NOT NULL;
        first := greatest((now() AT TIME ZONE 'UTC')::date, coalesce(date '1970-01-01' + (hi >> 32)::int, (now() AT TIME ZONE 'UTC')::date));
        WHILE first <= through LOOP
            part := tab || '_' || to_char(first, 'YYYYMMDD');
            EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH (fillfactor = %s)',
                part, tab, CASE tab WHEN 'deliveries' THEN 50 ELSE 100 END);
            IF tab = 'deliveries' THEN
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT deliveries_status_check CHECK (status IN '
                    '(''pending'', ''sending'', ''delivered'', ''failed'', ''expired'', ''skipped'', ''dead_token''))', part);
            ELSE
                EXECUTE format('ALTER TABLE %I ADD CONSTRAINT notifications_content_check CHECK (content IN '
                    '(''full'', ''generic'', ''encrypted''))', part);
            END IF;
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                tab, part, push_relay_history_bound(first), push_relay_history_bound(first + period_days));
            made := made + 1;
            first := first + period_days;
        END LOOP;
        SELECT max(lower) INTO current_start FROM history_partitions
        WHERE parent = tab AND lower IS NOT NULL AND lower <= push_relay_history_bound((now() AT TIME ZONE 'UTC')::date);
        IF current_start IS NOT NULL THEN
            EXECUTE format('SELECT setval(%L, %s, false) FROM %I WHERE CASE WHEN is_called THEN last_value + 1 ELSE last_value END < %s',
                tab || '_id_seq', current_start, tab || '_id_seq', current_start);
        END IF;
    END LOOP;
    RETURN made;
END $$;

SELECT push_relay_extend_history(7, (now() AT TIME ZONE 'UTC')::date + 14);
