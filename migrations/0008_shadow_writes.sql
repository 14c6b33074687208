-- +goose Up
-- Shadow mode (spec/operations.md, "Shadow mode"): every write Alfred would have made to the
-- forge for a project in shadow, in order, instead of making it.

-- One would-be write. mailbox_id is the mailbox of the issue or merge request written to (NULL
-- for a write to the repository itself: the labels Alfred creates). comment_id is the comment
-- created (its synthetic id, negative: no forge id is) or edited. add_labels and remove_labels
-- are JSON lists (labels, assignees); detail is what else the write said, as JSON.
CREATE TABLE shadow_writes (
    id            BIGSERIAL   PRIMARY KEY,
    mailbox_id    BIGINT      REFERENCES mailboxes (id) ON DELETE CASCADE,
    forge         TEXT        NOT NULL,
    repo          TEXT        NOT NULL,
    number        BIGINT      NOT NULL,
    merge_request BOOLEAN     NOT NULL DEFAULT FALSE,
    kind          TEXT        NOT NULL,
    comment_id    BIGINT      NOT NULL DEFAULT 0,
    body          TEXT        NOT NULL DEFAULT '',
    add_labels    TEXT        NOT NULL DEFAULT '[]',
    remove_labels TEXT        NOT NULL DEFAULT '[]',
    detail        TEXT        NOT NULL DEFAULT '{}',
    at            TIMESTAMPTZ NOT NULL
);
CREATE INDEX shadow_writes_target ON shadow_writes (forge, repo, number, merge_request, id);
CREATE INDEX shadow_writes_mailbox ON shadow_writes (mailbox_id, id);

-- +goose Down
DROP TABLE shadow_writes;
