-- The key generation becomes a random value instead of a counter, and console sessions move it.
--
-- Each instance keeps the live API keys and the console sessions in memory and re-reads them when
-- the generation differs from the one it holds. A counter could come back to a value an instance
-- already holds: after a failover to an asynchronous standby that lacks the last changes, or a
-- restore, the next change counts up to the lost value again, and a key revoked then would stay
-- accepted on that instance. A new random 64-bit value at every change never repeats (in practice).
CREATE FUNCTION push_relay_new_generation() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT ('x' || substr(md5(gen_random_uuid()::text || clock_timestamp()::text), 1, 16))::bit(64)::bigint
$$;

CREATE OR REPLACE FUNCTION api_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE api_key_generation SET generation = push_relay_new_generation();
    RETURN NULL;
END
$$;

-- Console sessions are kept in memory with the keys: opening one moves the generation (so every
-- instance knows it at once) and ending one (sign-out, the clean-up at sign-in) too (so it ends on
-- every instance within a second, as a revoked key does).
CREATE FUNCTION console_sessions_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE api_key_generation SET generation = push_relay_new_generation();
    RETURN NULL;
END
$$;

CREATE TRIGGER console_sessions_opened AFTER INSERT ON console_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION console_sessions_opened();

CREATE FUNCTION console_sessions_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ended) THEN
        UPDATE api_key_generation SET generation = push_relay_new_generation();
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER console_sessions_ended AFTER DELETE ON console_sessions
    REFERENCING OLD TABLE AS ended
    FOR EACH STATEMENT EXECUTE FUNCTION console_sessions_ended();

UPDATE api_key_generation SET generation = push_relay_new_generation();
