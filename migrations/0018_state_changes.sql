-- +goose Up
-- A mailbox's state as it changes, for the timeline of its page (spec/operations.md,
-- "Pages"): also what happened without an event, such as CI found green by a poll, the merge
-- and done. A trigger records each change of mailboxes.state, whatever statement makes it, at the
-- row's new updated_at (the store's clock, which every save sets). The rows hold state names
-- only, and go with their mailbox.
CREATE TABLE state_changes (
    id         BIGSERIAL   PRIMARY KEY,
    mailbox_id BIGINT      NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    at         TIMESTAMPTZ NOT NULL,
    from_state TEXT        NOT NULL,
    to_state   TEXT        NOT NULL
);

CREATE INDEX state_changes_mailbox ON state_changes (mailbox_id, id);

-- The function keeps the search_path it was created with, so that it writes to the schema of
-- its own mailboxes whatever the session's path is.
-- +goose StatementBegin
CREATE FUNCTION record_state_change() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO state_changes (mailbox_id, at, from_state, to_state)
    VALUES (NEW.id, NEW.updated_at, OLD.state, NEW.state);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER mailboxes_state_change AFTER UPDATE OF state ON mailboxes
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION record_state_change();

-- +goose Down
DROP TRIGGER mailboxes_state_change ON mailboxes;
DROP FUNCTION record_state_change();
DROP TABLE state_changes;
