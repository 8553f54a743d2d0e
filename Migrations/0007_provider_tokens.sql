-- Provider credentials shared by every instance: the current APNs provider token per key
-- ('apns:TEAM:KEYID') and the current FCM OAuth access token per service account
-- ('fcm:CLIENT_EMAIL'). Apple refuses a key's tokens when they change more often than every 20
-- minutes, whichever instance signs them, so one instance signs (under an advisory lock on the
-- credential) and the others use what it stored; likewise a cluster asks Google for one access
-- token, not one per instance. The tokens are bearer credentials valid for at most an hour.
CREATE TABLE provider_tokens (
    credential  text PRIMARY KEY,
    token       text NOT NULL,
    issued_at   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
