-- Apps managed through the admin API (PUT /v1/admin/apps/{app}), beside the configuration file's.
-- Each row is one app's whole configuration as JSON, sealed with AES-256-GCM under the operator's
-- key (apps_store.key_file): nonce, ciphertext and tag, the app id authenticated with them. Only
-- the id is in clear text. key_id names the key that sealed the row (sha256:… of the key), so a
-- row sealed with another key is reported as such, and a key rotation can find the rows to reseal.
CREATE TABLE managed_apps (
    id          text        PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    sealed      bytea       NOT NULL,
    key_id      text        NOT NULL,
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A counter every change to managed_apps increments, and a NOTIFY on push_relay_apps carrying it,
-- both in the changing transaction (by trigger, so psql edits count too): instances listening
-- reload at once, and the one-row counter tells an instance that lost its listener whether its
-- copy is current. Row triggers, not statement triggers: an INSERT … ON CONFLICT DO UPDATE fires
-- both the INSERT and the UPDATE statement triggers, but one row trigger for its one row.
CREATE TABLE managed_apps_generation (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint  NOT NULL
);
INSERT INTO managed_apps_generation (singleton, generation) VALUES (true, 1);

CREATE FUNCTION managed_apps_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    next bigint;
BEGIN
    UPDATE managed_apps_generation SET generation = generation + 1 RETURNING generation INTO next;
    PERFORM pg_notify('push_relay_apps', next::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER managed_apps_changed AFTER INSERT OR UPDATE OR DELETE ON managed_apps
    FOR EACH ROW EXECUTE FUNCTION managed_apps_changed();
CREATE TRIGGER managed_apps_truncated AFTER TRUNCATE ON managed_apps
    FOR EACH STATEMENT EXECUTE FUNCTION managed_apps_changed();
