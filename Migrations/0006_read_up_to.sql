-- Read up to a point: which notifications an owner's unread count on a ticket is made of.
--
-- notification_ids holds the ids of the notifications counted since the owner last read the
-- ticket, in the order intake counted them. A count from before this migration has no ids: its
-- unread - cardinality(notification_ids) notifications are older than any id, and a read up to
-- any point clears them. Adding a column with a constant default rewrites no rows.
ALTER TABLE unread_counters ADD COLUMN notification_ids bigint[] NOT NULL DEFAULT '{}';
