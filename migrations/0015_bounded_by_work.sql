-- +goose Up
-- Shadow mode keeps the latest edit of each comment only (spec/operations.md, "Shadow mode"):
-- while a run was held, every pass edited the status comment again and each edit was a row.
-- The earlier edits of a comment on the same target are deleted; new ones replace them as they
-- are recorded.
DELETE FROM shadow_writes AS w
WHERE w.kind = 'edit_comment' AND EXISTS (
    SELECT 1 FROM shadow_writes AS l
    WHERE l.kind = 'edit_comment' AND l.forge = w.forge AND l.repo = w.repo AND l.number = w.number
        AND l.merge_request = w.merge_request AND l.comment_id = w.comment_id AND l.id > w.id);

-- +goose Down
-- The deleted edits are not restored: each was replaced by a later edit of the same comment.
SELECT 1;
