-- +goose Up
-- SQLite translation of ../0005_reliability.sql. SQLite cannot drop a table constraint, so the
-- events table is rebuilt with the new one: a delivery is a duplicate only by its forge's
-- delivery identity and body together (two identical bodies under different delivery ids are
-- two real events; the same id with another body is kept and logged by the store).
CREATE TABLE events_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    mailbox_id   INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    forge        TEXT      NOT NULL,
    delivery_id  TEXT      NOT NULL,
    body_hash    TEXT      NOT NULL,
    event_type   TEXT      NOT NULL,
    payload      TEXT      NOT NULL, -- forge.Event as JSON
    received_at  TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    processed_at TIMESTAMP,
    outcome      TEXT      NOT NULL DEFAULT '',
    -- Poison events: failed attempts to apply the event, and when and why it was set aside.
    attempts     INTEGER   NOT NULL DEFAULT 0,
    failed_at    TIMESTAMP,
    error        TEXT      NOT NULL DEFAULT '',
    UNIQUE (forge, delivery_id, body_hash)
);
INSERT INTO events_new (id, mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome)
    SELECT id, mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_pending ON events (mailbox_id, id) WHERE processed_at IS NULL;

-- Reconciliation: when a mailbox was last compared with its forge and what was seen then.
ALTER TABLE mailboxes ADD COLUMN reconciled_at    TIMESTAMP;
ALTER TABLE mailboxes ADD COLUMN issue_updated_at TIMESTAMP;
ALTER TABLE mailboxes ADD COLUMN mr_updated_at    TIMESTAMP;
ALTER TABLE mailboxes ADD COLUMN comments_since   TIMESTAMP;
-- SQLite sorts NULL first in ascending order (and allows no NULLS FIRST in an index).
CREATE INDEX mailboxes_reconcile ON mailboxes (forge, reconciled_at) WHERE closed_at IS NULL;

-- Lease attempts: claims of the mailbox since its last pass that ended normally.
ALTER TABLE mailboxes ADD COLUMN lease_attempts INTEGER NOT NULL DEFAULT 0;

-- A comment acts once, whether it came as a delivery or was found by reconciliation.
CREATE TABLE applied_comments (
    mailbox_id INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    comment_id INTEGER   NOT NULL,
    event_id   INTEGER   NOT NULL,
    applied_at TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
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
CREATE TABLE events_old (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    mailbox_id   INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    forge        TEXT      NOT NULL,
    delivery_id  TEXT      NOT NULL,
    body_hash    TEXT      NOT NULL,
    event_type   TEXT      NOT NULL,
    payload      TEXT      NOT NULL,
    received_at  TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    processed_at TIMESTAMP,
    outcome      TEXT      NOT NULL DEFAULT '',
    UNIQUE (forge, delivery_id),
    UNIQUE (forge, body_hash)
);
INSERT OR IGNORE INTO events_old (id, mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome)
    SELECT id, mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome FROM events;
DROP TABLE events;
ALTER TABLE events_old RENAME TO events;
CREATE INDEX events_pending ON events (mailbox_id, id) WHERE processed_at IS NULL;
