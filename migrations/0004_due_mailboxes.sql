-- +goose Up
-- The lease claim reads only the mailboxes that are due, not all of them: the open ones whose
-- timer has come (this index, which closed mailboxes and mailboxes without a timer are not in)
-- and those with pending events (events_pending). It replaces mailboxes_wake, which held closed
-- mailboxes too and which nothing else reads.
CREATE INDEX mailboxes_due_wake ON mailboxes (wake_at) WHERE closed_at IS NULL AND wake_at IS NOT NULL;
DROP INDEX mailboxes_wake;

-- +goose Down
CREATE INDEX mailboxes_wake ON mailboxes (wake_at) WHERE wake_at IS NOT NULL;
DROP INDEX mailboxes_due_wake;
