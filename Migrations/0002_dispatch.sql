-- Delivery dispatch: claims per app, and the queue of dead tokens for Zendesk.

-- The dispatcher claims each app's due rows separately (bounded in-flight per app), so the due
-- index leads with the app. A claimed row is 'sending' with next_attempt_at = its lease expiry,
-- which makes a crashed instance's claims due again when the lease runs out.
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (app_id, next_attempt_at) WHERE status IN ('pending', 'sending');

-- Tokens APNs or FCM reported dead (or an admin removed), waiting to be forwarded to the app's
-- Zendesk Bulk Unregister API. One row per (app, token): each token is forwarded once.
CREATE TABLE zendesk_unregister_queue (
    app_id        text        NOT NULL,
    token         text        NOT NULL,
    platform      text        NOT NULL CHECK (platform IN ('ios', 'android')),
    reason        text        NOT NULL,
    job_id        uuid,
    attempts      integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error    text,
    queued_at     timestamptz NOT NULL DEFAULT now(),
    forwarded_at  timestamptz,
    PRIMARY KEY (app_id, token)
);
CREATE INDEX zendesk_unregister_due ON zendesk_unregister_queue (app_id, next_attempt_at) WHERE forwarded_at IS NULL;
