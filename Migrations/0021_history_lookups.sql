-- A notification's deliveries are found through the id range intake stores with it (0020), by
-- primary key: the index on `deliveries (notification_id)` is dropped from every partition, so
-- intake no longer writes an entry into it for each delivery (its cost: docs/benchmarks.md).
--
-- A notification without a range (stored before 0020) is looked up within 100 days of its id's day
-- (DeliveryPartitions.inRange): for one stored before 0019 that is the table 0019 found
-- unpartitioned, which keeps an index of its own on `notification_id` until retention drops it,
-- built again here (the drop takes the old one along: a partition of the partitioned index). The
-- drop locks `deliveries` first, so writes to it wait for the build, which reads the old table once;
-- building first would hold the old table alone, but a claim (whose plan locks every partition)
-- waiting on it would hold `deliveries` against the drop: a deadlock.
DROP INDEX deliveries_by_notification;

DO $$
BEGIN
    IF to_regclass('deliveries_unpartitioned') IS NOT NULL THEN
        CREATE INDEX deliveries_unpartitioned_by_notification ON deliveries_unpartitioned (notification_id);
    END IF;
END
$$;

-- The partitions' bounds are read without looking the partition up by its oid: `pg_get_expr` with
-- a relation returns NULL once that relation is dropped, and a statement whose snapshot still has a
-- partition that retention dropped meanwhile read its bounds as NULL (no lower bound, and an upper
-- bound no reader can decode). A bound holds constants only, which need no relation.
CREATE OR REPLACE VIEW history_partitions AS
SELECT parent.relname::text AS parent, child.relname::text AS partition, child.oid AS relid,
       nullif(substring(pg_get_expr(child.relpartbound, 0) FROM 'FROM \(''?([-0-9A-Z]+)''?\)'), 'MINVALUE')::bigint AS lower,
       substring(pg_get_expr(child.relpartbound, 0) FROM 'TO \(''?([-0-9]+)''?\)')::bigint AS upper,
       i.inhdetachpending AS detaching
FROM pg_inherits i
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_class child ON child.oid = i.inhrelid
WHERE parent.relname IN ('notifications', 'deliveries') AND parent.relnamespace = 'public'::regnamespace;
