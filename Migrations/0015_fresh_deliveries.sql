-- Fresh deliveries out of the due index, so a push delivered at once costs one HOT update.
--
-- `due` says a delivery waits in the due index (`deliveries_due`) for a dispatcher's claim: set for
-- queued and retried deliveries and for those claimed from the index. A delivery intake stores
-- already claimed (the fast path) is not due: its outcome changes no indexed column (the index
-- predicates read `due`, not `status`), so with room left on the page (fillfactor 50) it is a HOT
-- update that writes no index entry. Such a delivery is found again through `deliveries_unswept`
-- (keyed by its lease's end): every dispatcher's poll runs the sweep, which visits each not-due row
-- once its lease ended, in key order from the watermark in `delivery_sweep`, and makes due those
-- still pending or being sent (their instance died). docs/architecture.md, "The outbox".
--
-- The new column takes a constant default, so adding it reads no row: existing rows are not due, and
-- the deliveries still queued or in flight are marked due through the old due index. Building the
-- two indexes reads `deliveries` once, holding writes meanwhile (docs/operations.md, upgrading).
ALTER TABLE deliveries ADD COLUMN due boolean NOT NULL DEFAULT false;
UPDATE deliveries SET due = true WHERE status IN ('pending', 'sending');
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (app_id, next_attempt_at) WHERE due;
CREATE INDEX IF NOT EXISTS deliveries_unswept ON deliveries (next_attempt_at, id) WHERE NOT due;
ALTER TABLE deliveries SET (fillfactor = 50);

-- The sweep's watermark: every not-due delivery at or before (swept_to, swept_id) was visited after
-- its lease ended. One row; a sweep locks it, so one instance sweeps at a time.
CREATE TABLE delivery_sweep (
    one       boolean     PRIMARY KEY DEFAULT true CHECK (one),
    swept_to  timestamptz NOT NULL,
    swept_id  bigint      NOT NULL
);
INSERT INTO delivery_sweep (swept_to, swept_id) VALUES ('-infinity', 0);
