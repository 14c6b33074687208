-- +goose Up
-- SQLite translation of ../0018_state_changes.sql (a trigger with the same statement inside;
-- SQLite triggers need no function).
-- A mailbox's state as it changes, for the timeline of its page (spec/operations.md,
-- "Pages"): also what happened without an event, such as CI found green by a poll, the merge
-- and done. A trigger records each change of mailboxes.state, whatever statement makes it, at the
-- row's new updated_at (the store's clock, which every save sets). The rows hold state names
-- only, and go with their mailbox.
CREATE TABLE state_changes (
    id         INTEGER   PRIMARY KEY AUTOINCREMENT,
    mailbox_id INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    at         TIMESTAMP NOT NULL,
    from_state TEXT      NOT NULL,
    to_state   TEXT      NOT NULL
);

CREATE INDEX state_changes_mailbox ON state_changes (mailbox_id, id);

-- +goose StatementBegin
CREATE TRIGGER mailboxes_state_change AFTER UPDATE OF state ON mailboxes
WHEN OLD.state IS NOT NEW.state
BEGIN
    INSERT INTO state_changes (mailbox_id, at, from_state, to_state)
    VALUES (NEW.id, NEW.updated_at, OLD.state, NEW.state);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER mailboxes_state_change;
DROP TABLE state_changes;
