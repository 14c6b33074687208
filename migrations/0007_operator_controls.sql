-- +goose Up
-- The operator's controls on the pages (spec/operations.md, "Controls").

-- A paused mailbox: its events are still stored, no worker claims it until it is resumed.
ALTER TABLE mailboxes ADD COLUMN paused_at TIMESTAMPTZ;
ALTER TABLE mailboxes ADD COLUMN paused_by TEXT NOT NULL DEFAULT '';

-- A paused project (a forge's repository): no worker claims any of its mailboxes, those created
-- while it is paused included.
CREATE TABLE paused_projects (
    forge     TEXT        NOT NULL,
    repo      TEXT        NOT NULL,
    paused_at TIMESTAMPTZ NOT NULL,
    paused_by TEXT        NOT NULL,
    PRIMARY KEY (forge, repo)
);

-- What an operator did, and who: shown in the mailbox's timeline. A project's action has no
-- mailbox and is shown in the timeline of each of the project's mailboxes.
CREATE TABLE operator_actions (
    id         BIGSERIAL   PRIMARY KEY,
    mailbox_id BIGINT      REFERENCES mailboxes (id) ON DELETE CASCADE,
    forge      TEXT        NOT NULL,
    repo       TEXT        NOT NULL,
    action     TEXT        NOT NULL,
    actor      TEXT        NOT NULL,
    at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX operator_actions_mailbox ON operator_actions (mailbox_id);
CREATE INDEX operator_actions_project ON operator_actions (forge, repo) WHERE mailbox_id IS NULL;

-- A run an operator asked to cancel: who asked ('' for none). The running phase looks for it.
ALTER TABLE runs ADD COLUMN cancel_requested_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN cancel_requested_by;
DROP TABLE operator_actions;
DROP TABLE paused_projects;
ALTER TABLE mailboxes DROP COLUMN paused_by;
ALTER TABLE mailboxes DROP COLUMN paused_at;
