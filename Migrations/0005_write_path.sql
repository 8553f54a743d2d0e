-- Less work per webhook and per delivery outcome, the two statements every push goes through.
--
-- Two indexes no query of PushRelay reads: deliveries by (app_id, device_token) and notifications
-- by (app_id, ticket_id). Each webhook inserted an entry into both, and each delivery outcome
-- (an UPDATE that changes status, so not a HOT update) another one into the first: text keys
-- holding whole device tokens, on the two hottest tables. An operator who looks deliveries up
-- by device can create the index again (CREATE INDEX CONCURRENTLY, outside a migration).
DROP INDEX IF EXISTS deliveries_by_device;
DROP INDEX IF EXISTS notifications_by_ticket;

-- The foreign key from deliveries to notifications: intake inserts a notification and its
-- deliveries in one statement, so the key cannot be missing, and PushRelay never deletes
-- notifications. Its check cost an index lookup and a row lock (a WAL record) on the
-- notification per delivery, a tenth of the intake statement's time. Without its ON DELETE
-- CASCADE, whoever deletes notifications by hand deletes their deliveries first
-- (deliveries_by_notification finds them).
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_notification_id_fkey;
