-- PushRelay initial schema.
-- Apps themselves live in the configuration file; every row here is keyed by the app's id.

-- Device registry: one row per (app, token). Invalid devices stay (with the reason) so a dead
-- token is never sent to again until the app registers it anew.
CREATE TABLE devices (
    app_id          text        NOT NULL,
    token           text        NOT NULL,
    platform        text        NOT NULL CHECK (platform IN ('ios', 'android')),
    user_id         text,
    environment     text        CHECK (environment IN ('production', 'sandbox')),
    locale          text,
    status          text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'invalid')),
    invalid_reason  text,
    invalidated_at  timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, token)
);
CREATE INDEX devices_by_user ON devices (app_id, user_id) WHERE user_id IS NOT NULL;

-- One accepted webhook.
CREATE TABLE notifications (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id          text        NOT NULL,
    ticket_id       text        NOT NULL,
    title           text        NOT NULL,
    body            text        NOT NULL,
    request_id      text,
    received_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_by_ticket ON notifications (app_id, ticket_id);

-- The outbox: one row per (notification, device). The dispatcher claims due rows with
-- FOR UPDATE SKIP LOCKED and a lease; the table, not NOTIFY, is the truth.
CREATE TABLE deliveries (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id  bigint      NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    app_id           text        NOT NULL,
    device_token     text        NOT NULL,
    platform         text        NOT NULL CHECK (platform IN ('ios', 'android')),
    kind             text        NOT NULL DEFAULT 'alert' CHECK (kind IN ('alert', 'badge_sync')),
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'sending', 'delivered', 'failed', 'expired', 'skipped')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    provider_id      text,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status IN ('pending', 'sending');
CREATE INDEX deliveries_by_notification ON deliveries (notification_id);
CREATE INDEX deliveries_by_device ON deliveries (app_id, device_token);

-- Unread replies per (app, owner, ticket); the owner is the device's user_id, or the token itself
-- when no user is linked.
CREATE TABLE unread_counters (
    app_id      text        NOT NULL,
    owner       text        NOT NULL,
    ticket_id   text        NOT NULL,
    unread      integer     NOT NULL DEFAULT 0 CHECK (unread >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, owner, ticket_id)
);

-- Background jobs (bulk unregister, Zendesk forwarding). Any instance may run a job; a lease lets
-- another instance resume it after a crash.
CREATE TABLE jobs (
    id               uuid        PRIMARY KEY,
    app_id           text        NOT NULL,
    kind             text        NOT NULL,
    status           text        NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    parameters       jsonb       NOT NULL DEFAULT '{}',
    total            bigint      NOT NULL DEFAULT 0,
    processed        bigint      NOT NULL DEFAULT 0,
    removed          bigint      NOT NULL DEFAULT 0,
    not_found        bigint      NOT NULL DEFAULT 0,
    failed           bigint      NOT NULL DEFAULT 0,
    error            text,
    lease_owner      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz
);
CREATE INDEX jobs_runnable ON jobs (created_at) WHERE status IN ('queued', 'running');

-- API keys: only a SHA-256 hash of the secret part is stored. app_id NULL marks an admin key.
CREATE TABLE api_keys (
    id            uuid        PRIMARY KEY,
    prefix        text        NOT NULL UNIQUE,
    secret_hash   bytea       NOT NULL,
    app_id        text,
    scopes        text[]      NOT NULL DEFAULT '{}',
    label         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
