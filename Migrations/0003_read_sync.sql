-- Read sync: a badge-only push to a user's other devices belongs to no notification.
ALTER TABLE deliveries ALTER COLUMN notification_id DROP NOT NULL;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_alert_has_notification CHECK (kind <> 'alert' OR notification_id IS NOT NULL);
