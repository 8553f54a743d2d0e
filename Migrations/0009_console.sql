-- The operator console: sign-in sessions, the activity its Overview charts, and the last credential
-- rejection per app and platform its Apps page shows.

-- A console session: the browser holds a random token in an HttpOnly cookie; only its SHA-256 is
-- stored. A session acts as the API key it was opened with and ends with it (ON DELETE CASCADE, and
-- every lookup checks the key is not revoked), when idle too long, or at sign-out.
CREATE TABLE console_sessions (
    token_hash    bytea       PRIMARY KEY,
    key_id        uuid        NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    csrf_token    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_by_key ON console_sessions (key_id);

-- Per app and minute: webhooks accepted and final delivery outcomes, summed over every instance.
-- Each instance adds what it counted every few seconds (one upsert per app and minute it saw),
-- so the Overview's hour of history costs nothing on the webhook or delivery path. Rows older
-- than two hours are deleted by the same writer.
CREATE TABLE activity_minutes (
    app_id      text        NOT NULL,
    minute      timestamptz NOT NULL,
    webhooks    bigint      NOT NULL DEFAULT 0,
    delivered   bigint      NOT NULL DEFAULT 0,
    failed      bigint      NOT NULL DEFAULT 0,
    expired     bigint      NOT NULL DEFAULT 0,
    dead_token  bigint      NOT NULL DEFAULT 0,
    skipped     bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (app_id, minute)
);

-- The last time a provider refused an app's credentials (APNs 403 InvalidProviderToken, FCM 401,
-- a TLS set-up that fails on the configuration), with the provider's reason.
CREATE TABLE credential_rejections (
    app_id       text        NOT NULL,
    platform     text        NOT NULL CHECK (platform IN ('ios', 'android')),
    rejected_at  timestamptz NOT NULL,
    reason       text        NOT NULL,
    PRIMARY KEY (app_id, platform)
);
