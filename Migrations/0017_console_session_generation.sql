-- Console sessions get a generation of their own, so a sign-in no longer moves the API keys'.
--
-- Each instance keeps the live keys and the console sessions in memory (docs/architecture.md).
-- Opening or ending a session moved `api_key_generation`, so every sign-in made every instance
-- read every key again as well as every session. Sessions now move `console_session_generation`
-- (random, as the keys' is since 0013) and an instance reads the sessions alone when only it
-- moved; a key created or revoked still moves the keys' generation, which reads both.
--
-- The sessions an instance reads are the newest by use: the index keeps that read a range scan
-- of the newest rows, however many there are. The relay keeps at most
-- `console.max_sessions_per_key` per key (the oldest closed when a new one opens).
CREATE TABLE console_session_generation (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint  NOT NULL
);
INSERT INTO console_session_generation (singleton, generation) VALUES (true, push_relay_new_generation());

CREATE OR REPLACE FUNCTION console_sessions_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE console_session_generation SET generation = push_relay_new_generation();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION console_sessions_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ended) THEN
        UPDATE console_session_generation SET generation = push_relay_new_generation();
    END IF;
    RETURN NULL;
END
$$;

CREATE INDEX console_sessions_by_last_seen ON console_sessions (last_seen_at);
