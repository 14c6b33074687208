-- +goose Up
-- A delivery is a duplicate only by its forge's delivery identity (GitLab Idempotency-Key,
-- Forgejo/Gitea X-*-Delivery). Two deliveries with identical bodies under different ids are
-- two real events (assign, unassign, assign within a second): both are kept. The same id with
-- a different body is kept too (and logged by the store). Events derived by reconciliation
-- carry a delivery id of their own ("reconcile:…").
ALTER TABLE events DROP CONSTRAINT events_forge_body_hash_key;
ALTER TABLE events DROP CONSTRAINT events_forge_delivery_id_key;
ALTER TABLE events ADD CONSTRAINT events_forge_delivery_body_key UNIQUE (forge, delivery_id, body_hash);

-- Poison events: failed attempts to apply an event, and when and why it was set aside
-- (processed_at is set too, so the inbox goes on with the events after it).
ALTER TABLE events ADD COLUMN attempts  INTEGER     NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN failed_at TIMESTAMPTZ;
ALTER TABLE events ADD COLUMN error     TEXT        NOT NULL DEFAULT '';

-- Reconciliation: when a mailbox was last compared with its forge and what was seen then
-- (the issue's and the merge request's updated time, the time up to which comments were read).
ALTER TABLE mailboxes ADD COLUMN reconciled_at    TIMESTAMPTZ;
ALTER TABLE mailboxes ADD COLUMN issue_updated_at TIMESTAMPTZ;
ALTER TABLE mailboxes ADD COLUMN mr_updated_at    TIMESTAMPTZ;
ALTER TABLE mailboxes ADD COLUMN comments_since   TIMESTAMPTZ;
CREATE INDEX mailboxes_reconcile ON mailboxes (forge, reconciled_at NULLS FIRST) WHERE closed_at IS NULL;

-- Lease attempts: claims of the mailbox since its last step that ended normally; a step that
-- kills the process leaves it counted.
ALTER TABLE mailboxes ADD COLUMN lease_attempts INTEGER NOT NULL DEFAULT 0;

-- A comment acts once, whether it came as a delivery or was found by reconciliation: the first
-- event that carries it claims it (a retry of that same event still may act).
CREATE TABLE applied_comments (
    mailbox_id BIGINT      NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    comment_id BIGINT      NOT NULL,
    event_id   BIGINT      NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (mailbox_id, comment_id)
);

-- +goose Down
DROP TABLE applied_comments;
ALTER TABLE mailboxes DROP COLUMN lease_attempts;
DROP INDEX mailboxes_reconcile;
ALTER TABLE mailboxes DROP COLUMN comments_since;
ALTER TABLE mailboxes DROP COLUMN mr_updated_at;
ALTER TABLE mailboxes DROP COLUMN issue_updated_at;
ALTER TABLE mailboxes DROP COLUMN reconciled_at;
ALTER TABLE events DROP COLUMN error;
ALTER TABLE events DROP COLUMN failed_at;
ALTER TABLE events DROP COLUMN attempts;
ALTER TABLE events DROP CONSTRAINT events_forge_delivery_body_key;
ALTER TABLE events ADD CONSTRAINT events_forge_delivery_id_key UNIQUE (forge, delivery_id);
ALTER TABLE events ADD CONSTRAINT events_forge_body_hash_key UNIQUE (forge, body_hash);
