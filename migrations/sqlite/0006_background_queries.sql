-- +goose Up
-- SQLite translation of ../0006_background_queries.sql (the same statements).
-- The statements Alfred issues on its own (the run workers' claim, the sweeps, reconciliation,
-- the look-ups of a merge request's issue) read the rows that are due or that match, through
-- these indexes, and never every mailbox ever created.

-- By state, then repository: the run workers' claim and the queued-runs list read the mailboxes
-- in a run state (not the closed ones, all 'done' or 'cancelled'), and the claim's count of
-- live runs per project reads those of one repository.
CREATE INDEX mailboxes_state ON mailboxes (state, forge, repo);

-- Held leases (the orphan sweep's live leases, the expired leases counted at start-up).
CREATE INDEX mailboxes_leased ON mailboxes (lease_expires_at) WHERE lease_owner IS NOT NULL;

-- Open mailboxes (the orphan sweep).
CREATE INDEX mailboxes_open ON mailboxes (id) WHERE closed_at IS NULL;

-- The issue mailbox of a merge request or pipeline by its head commit (status deliveries).
CREATE INDEX mailboxes_head_sha ON mailboxes (forge, repo, head_sha) WHERE head_sha <> '';

-- Retention: when a closed mailbox's texts were last purged. A mailbox is purgeable while it is
-- closed and has changed since (never purged, or saved after its purge: an event processed,
-- reopened and closed again); the index holds those only, so the sweep does not read the
-- mailboxes it purged before.
ALTER TABLE mailboxes ADD COLUMN purged_at TIMESTAMP;
CREATE INDEX mailboxes_purgeable ON mailboxes (closed_at)
    WHERE closed_at IS NOT NULL AND (purged_at IS NULL OR purged_at < updated_at);

-- A mailbox's events (the purge's delete, the cascade when a mailbox row is deleted).
CREATE INDEX events_mailbox ON events (mailbox_id);

-- Runs still running (the start-up recovery).
CREATE INDEX runs_running ON runs (mailbox_id) WHERE status = 'running';

-- +goose Down
DROP INDEX runs_running;
DROP INDEX events_mailbox;
DROP INDEX mailboxes_purgeable;
ALTER TABLE mailboxes DROP COLUMN purged_at;
DROP INDEX mailboxes_head_sha;
DROP INDEX mailboxes_open;
DROP INDEX mailboxes_leased;
DROP INDEX mailboxes_state;
