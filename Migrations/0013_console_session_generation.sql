-- Console sessions are checked from each instance's memory, like API keys: an instance re-reads a
-- session only when the key generation moved or once a minute (when it also writes last_seen_at).
-- Ending sessions (sign-out, the clean-up at sign-in) moves the same generation, so a session
-- signed out on one instance ends on every instance within a second, as a revoked key does.
CREATE FUNCTION console_sessions_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ended) THEN
        UPDATE api_key_generation SET generation = generation + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER console_sessions_ended AFTER DELETE ON console_sessions
    REFERENCING OLD TABLE AS ended
    FOR EACH STATEMENT EXECUTE FUNCTION console_sessions_ended();
