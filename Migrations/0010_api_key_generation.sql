-- A counter every change to api_keys increments (any statement: a key created, revoked, deleted),
-- in the same transaction. Each instance keeps the live keys in memory and reads this one row at
-- most once a second to know whether its copy is still current, so a key revoked anywhere (the
-- CLI, psql, another instance) stops working on every instance within a second without a
-- database query per request.
CREATE TABLE api_key_generation (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint  NOT NULL
);
INSERT INTO api_key_generation (singleton, generation) VALUES (true, 1);

CREATE FUNCTION api_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE api_key_generation SET generation = generation + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION api_keys_changed();
