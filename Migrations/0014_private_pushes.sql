-- Private pushes: an app's content mode per notification, and devices' end-to-end keys.
--
-- A `generic` app's notifications are stored without their text (title and body NULL). An
-- `encrypted` app's keep it until every delivery of the notification ended, then it is erased;
-- `content` says which, so the status API and the console can say why a notification has no text.
--
-- Nothing here reads every row: the new columns take constant defaults, and the checks are
-- NOT VALID because every existing row holds those defaults (`full`; no key), which pass them.
ALTER TABLE notifications
    ALTER COLUMN title DROP NOT NULL,
    ALTER COLUMN body DROP NOT NULL,
    ADD COLUMN content text NOT NULL DEFAULT 'full',
    ADD CONSTRAINT notifications_content_check CHECK (content IN ('full', 'generic', 'encrypted')) NOT VALID;

-- A device's push key (32 bytes, AES-256), sealed with the apps-store key when one is configured
-- (`push_key_sealed_by` names it), and the id the app gave it. Never returned by the API.
ALTER TABLE devices
    ADD COLUMN push_key_id text,
    ADD COLUMN push_key bytea,
    ADD COLUMN push_key_sealed_by text,
    ADD CONSTRAINT devices_push_key_pair CHECK ((push_key IS NULL) = (push_key_id IS NULL)) NOT VALID;

-- Retention's sweep finds the encrypted notifications that still hold their text through this
-- index; it holds only those rows (a `full` app's insert only checks its condition). Building it
-- reads `notifications` once, holding writes meanwhile (docs/operations.md, upgrading).
CREATE INDEX notifications_text_kept ON notifications (id) WHERE content = 'encrypted' AND title IS NOT NULL;
