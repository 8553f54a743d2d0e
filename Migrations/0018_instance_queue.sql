-- What each instance has in flight, per app, so the console's queue depth reads no history row.
--
-- A delivery stored claimed at intake is not due (0015): nothing indexes it by status, and counting
-- those still being sent meant walking every not-due row after the sweep's watermark, delivered
-- ones included (every push of the last lease, or the whole history before a first sweep). Each
-- instance knows what it claimed and has not finished; it writes that here every few seconds
-- (only apps with something in flight), and the overview sums the rows written lately. A row an
-- instance stopped refreshing (it stopped or died) is ignored after three reports, and deleted
-- after an hour; the deliveries it held come due again after their lease, counted as pending.
CREATE TABLE instance_queue (
    instance    text        NOT NULL,
    app_id      text        NOT NULL,
    in_flight   integer     NOT NULL CHECK (in_flight > 0),
    reported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance, app_id)
);
