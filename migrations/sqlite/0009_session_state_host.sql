-- +goose Up
-- SQLite translation of ../0009_session_state_host.sql.
-- Where each run left its agent session state: the id of the data directory of the replica
-- that ran it (runner.StateHost).
ALTER TABLE llm_sessions ADD COLUMN state_host TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE llm_sessions DROP COLUMN state_host;
