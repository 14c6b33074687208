-- +goose Up
-- SQLite translation of ../0001_init.sql (see the package documentation for the type mapping:
-- timestamps are INTEGER microseconds since the Unix epoch, UTC, in columns declared TIMESTAMP;
-- booleans are 0/1; JSON documents are TEXT).
-- Mailboxes: one per issue (and per merge request that is not the bot's own).
CREATE TABLE mailboxes (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    forge            TEXT      NOT NULL,
    repo             TEXT      NOT NULL,
    number           INTEGER   NOT NULL,
    merge_request    BOOLEAN   NOT NULL DEFAULT FALSE,
    state            TEXT      NOT NULL DEFAULT 'idle',
    issue_type       TEXT      NOT NULL DEFAULT '',
    author           TEXT      NOT NULL DEFAULT '',
    title            TEXT      NOT NULL DEFAULT '',
    labels           TEXT      NOT NULL DEFAULT '[]', -- JSON array: last known labels on the forge
    assignees        TEXT      NOT NULL DEFAULT '[]', -- JSON array: last known assignee logins
    branch           TEXT      NOT NULL DEFAULT '',   -- frozen at the first run
    mr_number        INTEGER   NOT NULL DEFAULT 0,    -- the bot's merge request, 0 when none
    head_sha         TEXT      NOT NULL DEFAULT '',
    data             TEXT      NOT NULL DEFAULT '{}', -- JSON document, see mailbox.Data
    wake_at          TIMESTAMP,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMP,
    closed_at        TIMESTAMP,
    created_at       TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at       TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    UNIQUE (forge, repo, number, merge_request)
);
CREATE INDEX mailboxes_mr ON mailboxes (forge, repo, mr_number) WHERE mr_number <> 0;
CREATE INDEX mailboxes_branch ON mailboxes (forge, repo, branch) WHERE branch <> '';
CREATE INDEX mailboxes_wake ON mailboxes (wake_at) WHERE wake_at IS NOT NULL;

-- Events: the inbox. A delivery is stored once (by delivery id, and by body hash because a
-- manual re-delivery on Forgejo gets a new id).
CREATE TABLE events (
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
    UNIQUE (forge, delivery_id),
    UNIQUE (forge, body_hash)
);
CREATE INDEX events_pending ON events (mailbox_id, id) WHERE processed_at IS NULL;

-- Questions asked in the issue; a sweeper applies default_option at deadline_at.
CREATE TABLE questions (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    mailbox_id     INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    round          INTEGER   NOT NULL,
    qid            TEXT      NOT NULL,
    title          TEXT      NOT NULL,
    context        TEXT      NOT NULL DEFAULT '',
    options        TEXT      NOT NULL, -- JSON array of runner.Option
    default_option TEXT      NOT NULL,
    deadline_at    TIMESTAMP NOT NULL,
    answer         TEXT,
    answered_by    TEXT,
    answered_at    TIMESTAMP,
    UNIQUE (mailbox_id, round, qid)
);

-- Runs: one agent step in one container.
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    mailbox_id  INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    phase       TEXT      NOT NULL,
    step        TEXT      NOT NULL DEFAULT '',
    attempt     INTEGER   NOT NULL,
    status      TEXT      NOT NULL DEFAULT 'running', -- running, succeeded, failed, interrupted
    container   TEXT      NOT NULL DEFAULT '',
    started_at  TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    finished_at TIMESTAMP,
    exit_code   INTEGER,
    outcome     TEXT      NOT NULL DEFAULT '',
    output      TEXT      NOT NULL DEFAULT '', -- redacted, size-capped
    result      TEXT      NOT NULL DEFAULT ''  -- runner.Result as JSON
);
CREATE INDEX runs_mailbox ON runs (mailbox_id, id);

-- Comments the bot posted, by the key in their hidden marker.
CREATE TABLE comments (
    mailbox_id INTEGER NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    key        TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    comment_id INTEGER NOT NULL,
    body_hash  TEXT    NOT NULL,
    PRIMARY KEY (mailbox_id, key)
);

-- +goose Down
DROP TABLE comments;
DROP TABLE runs;
DROP TABLE questions;
DROP TABLE events;
DROP TABLE mailboxes;
