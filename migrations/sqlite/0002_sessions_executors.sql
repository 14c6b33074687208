-- +goose Up
-- SQLite translation of ../0002_sessions_executors.sql.
-- One agent session per (mailbox, adapter): every run records which native session it used,
-- whether it resumed, and why not (see runner.Fallback*).
CREATE TABLE llm_sessions (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    mailbox_id       INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    run_id           INTEGER   REFERENCES runs (id) ON DELETE SET NULL,
    adapter          TEXT      NOT NULL,
    model            TEXT      NOT NULL DEFAULT '',
    session_name     TEXT      NOT NULL,
    native_id        TEXT      NOT NULL DEFAULT '',
    resumed          BOOLEAN   NOT NULL DEFAULT FALSE,
    fallback_reason  TEXT      NOT NULL DEFAULT '',
    tokens_in        INTEGER   NOT NULL DEFAULT 0, -- this run's share
    tokens_out       INTEGER   NOT NULL DEFAULT 0,
    cost_usd         REAL      NOT NULL DEFAULT 0,
    reported_in      INTEGER   NOT NULL DEFAULT 0, -- as the CLI reported it (cumulative on some CLIs)
    reported_out     INTEGER   NOT NULL DEFAULT 0,
    reported_cost    REAL      NOT NULL DEFAULT 0,
    duration_ms      INTEGER   NOT NULL DEFAULT 0,
    succeeded        BOOLEAN   NOT NULL DEFAULT FALSE,
    created_at       TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);
CREATE INDEX llm_sessions_mailbox ON llm_sessions (mailbox_id, adapter, id);

-- CLI versions detected per image; a version not verified to resume lowers the capability.
CREATE TABLE agent_installations (
    adapter         TEXT      NOT NULL,
    image           TEXT      NOT NULL,
    version         TEXT      NOT NULL,
    resume_verified BOOLEAN   NOT NULL,
    detected_at     TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    PRIMARY KEY (adapter, image)
);

-- Running executors: the containers Alfred started, so that a restarted Alfred can find them
-- again (reattach, collect, or fail the run with a reason).
CREATE TABLE executors (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id                  INTEGER   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    session_id              INTEGER   REFERENCES llm_sessions (id) ON DELETE SET NULL,
    mailbox_id              INTEGER   NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
    runtime                 TEXT      NOT NULL DEFAULT 'docker',
    container_id            TEXT      NOT NULL DEFAULT '',
    container_name          TEXT      NOT NULL,
    status                  TEXT      NOT NULL DEFAULT 'starting', -- starting, ready, error, stopped
    supports_session_resume BOOLEAN   NOT NULL DEFAULT FALSE,
    native_session_id       TEXT      NOT NULL DEFAULT '',
    workspace_path          TEXT      NOT NULL DEFAULT '',
    branch                  TEXT      NOT NULL DEFAULT '',
    last_seen_at            TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    error_message           TEXT      NOT NULL DEFAULT '',
    created_at              TIMESTAMP NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    UNIQUE (container_name)
);
CREATE INDEX executors_live ON executors (status) WHERE status IN ('starting', 'ready');

-- +goose Down
DROP TABLE executors;
DROP TABLE agent_installations;
DROP TABLE llm_sessions;
