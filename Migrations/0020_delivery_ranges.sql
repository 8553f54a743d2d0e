-- Each notification keeps the id range of its deliveries, so that a lookup of them (the status API,
-- the erase of an encrypted text) reads the one or two partitions of `deliveries` that range is in,
-- not every partition's `deliveries_by_notification` index (migration 0019 partitions by id).
--
-- Intake stores a notification and its deliveries in one statement, which fills both columns: the
-- smallest and the largest id of the deliveries it stored, or 0 and 0 when it stored none (no
-- delivery has id 0). A notification stored before this migration has NULL in both: its lookups
-- read every partition, as before. Nothing is rewritten: the columns are nullable, without a
-- default.
ALTER TABLE notifications ADD COLUMN first_delivery_id bigint, ADD COLUMN last_delivery_id bigint;
