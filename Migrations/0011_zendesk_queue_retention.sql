-- Retention deletes tokens forwarded to Zendesk longer ago than retention.zendesk_forwarded_days,
-- oldest first, in small batches: this index lets each batch find them without reading the
-- tokens still waiting (zendesk_unregister_due covers those).
CREATE INDEX zendesk_unregister_forwarded ON zendesk_unregister_queue (forwarded_at) WHERE forwarded_at IS NOT NULL;
