-- Delivery visibility: the status API's lookups, feedback events to the customer's endpoint, and
-- retention (leases for work one instance at a time does).

-- A ticket's latest notifications (GET …/tickets/{ticket}/notifications): one entry per webhook,
-- read newest first by scanning the index backwards from the cursor.
CREATE INDEX IF NOT EXISTS notifications_by_ticket_id ON notifications (app_id, ticket_id, id);

-- A device's latest deliveries (GET …/devices/{token}/deliveries). Keyed by a 64-bit hash of the
-- token rather than the token (up to 1 KB of text, on the table every outcome updates); the query
-- compares the token too, so a collision costs a row, never a wrong answer.
CREATE INDEX IF NOT EXISTS deliveries_by_device_hash ON deliveries (app_id, hashtextextended(device_token, 0), id);

-- Feedback events: written in the transaction that stores a delivery's outcome (an outbox), sent to
-- the app's events.url in batches in id order, and deleted once the receiver accepted them.
CREATE TABLE delivery_events (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id           text        NOT NULL,
    type             text        NOT NULL,
    delivery_id      bigint      NOT NULL,
    notification_id  bigint,
    ticket_id        text,
    platform         text        NOT NULL CHECK (platform IN ('ios', 'android')),
    -- The device token shortened as in logs (first 6 and last 4 characters).
    token_hint       text        NOT NULL,
    reason           text,
    at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_events_by_app ON delivery_events (app_id, id);

-- Named leases for work that one instance at a time does (retention, an app's event sending): an
-- instance holds a lease until expires_at and renews it while it works; a crashed holder's lease
-- runs out and another instance takes it.
CREATE TABLE leases (
    name        text        PRIMARY KEY,
    owner       text        NOT NULL,
    expires_at  timestamptz NOT NULL
);

-- A delivery whose token the provider reported dead gets its own status (it was 'failed' with the
-- reason). The new check allows more than the old one, so rows already stored pass it: NOT VALID
-- skips the scan of the whole table, and new and updated rows are checked as before. Last in this
-- file: changing a constraint locks the table against reads too until the migration commits, so
-- it comes after the index builds (which only hold writes back).
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('pending', 'sending', 'delivered', 'failed', 'expired', 'skipped', 'dead_token')) NOT VALID;
