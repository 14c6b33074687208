-- +goose Up
-- SQLite translation of ../0015_bounded_by_work.sql.
-- Shadow mode keeps the latest edit of each comment only: the earlier edits of a comment on the
-- same target are deleted.
DELETE FROM shadow_writes
WHERE kind = 'edit_comment' AND EXISTS (
    SELECT 1 FROM shadow_writes AS l
    WHERE l.kind = 'edit_comment' AND l.forge = shadow_writes.forge AND l.repo = shadow_writes.repo
        AND l.number = shadow_writes.number AND l.merge_request = shadow_writes.merge_request
        AND l.comment_id = shadow_writes.comment_id AND l.id > shadow_writes.id);


-- The pending events of a mailbox are read through an index of the pending events alone: with
-- (mailbox_id, id), SQLite's planner chose events_mailbox (every event of the mailbox, then
-- processed_at checked row by row), so each pass and each claim read all the events a mailbox
-- ever had and ingest slowed as they accumulated. With processed_at in the key, the pending
-- look-ups match two columns of it and search it.
DROP INDEX events_pending;
CREATE INDEX events_pending ON events (mailbox_id, processed_at, id) WHERE processed_at IS NULL;

-- +goose Down
-- The deleted edits are not restored: each was replaced by a later edit of the same comment.
DROP INDEX events_pending;
CREATE INDEX events_pending ON events (mailbox_id, id) WHERE processed_at IS NULL;
