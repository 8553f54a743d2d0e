-- Bulk-unregister jobs: the uploaded tokens, numbered in upload order. A job processes them in
-- batches; jobs.processed is the number of the last line done, so a resumed job goes on from there.
CREATE TABLE job_tokens (
    job_id  uuid    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    line    bigint  NOT NULL,
    token   text    NOT NULL,
    PRIMARY KEY (job_id, line)
);

ALTER TABLE jobs ADD COLUMN propagate_to_zendesk boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_recent ON jobs (created_at DESC);
CREATE INDEX zendesk_unregister_by_job ON zendesk_unregister_queue (job_id) WHERE job_id IS NOT NULL;
