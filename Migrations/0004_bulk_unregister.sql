-- Bulk-unregister jobs: the uploaded tokens, numbered in upload order. A job processes fixed
-- ranges of lines (batches), several at once; each batch commits with its row in job_batches, so a
-- resumed job skips exactly the batches already done and the counts stay exact.
-- No foreign key to jobs: its per-row check would cost more than the COPY of a million-line
-- upload itself. The job's rows are deleted when it finishes.
CREATE TABLE job_tokens (
    job_id  uuid    NOT NULL,
    line    bigint  NOT NULL,
    token   text    NOT NULL,
    PRIMARY KEY (job_id, line)
);

CREATE TABLE job_batches (
    job_id      uuid    NOT NULL,
    first_line  bigint  NOT NULL,
    last_line   bigint  NOT NULL,
    removed     bigint  NOT NULL,
    not_found   bigint  NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, first_line)
);

ALTER TABLE jobs ADD COLUMN propagate_to_zendesk boolean NOT NULL DEFAULT false;
-- Fixed when the job first runs, so the batches of a resumed job line up with the ones done.
ALTER TABLE jobs ADD COLUMN batch_size integer;
CREATE INDEX jobs_recent ON jobs (created_at DESC);
CREATE INDEX zendesk_unregister_by_job ON zendesk_unregister_queue (job_id) WHERE job_id IS NOT NULL;
