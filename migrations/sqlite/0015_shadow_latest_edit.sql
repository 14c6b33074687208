-- +goose Up
-- SQLite translation of ../0015_shadow_latest_edit.sql.
-- Shadow mode keeps the latest edit of each comment only: the earlier edits of a comment on the
-- same target are deleted.
DELETE FROM shadow_writes
WHERE kind = 'edit_comment' AND EXISTS (
    SELECT 1 FROM shadow_writes AS l
    WHERE l.kind = 'edit_comment' AND l.forge = shadow_writes.forge AND l.repo = shadow_writes.repo
        AND l.number = shadow_writes.number AND l.merge_request = shadow_writes.merge_request
        AND l.comment_id = shadow_writes.comment_id AND l.id > shadow_writes.id);

-- +goose Down
-- The deleted edits are not restored: each was replaced by a later edit of the same comment.
SELECT 1;
