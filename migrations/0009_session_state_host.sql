-- +goose Up
-- Where each run left its agent session state (spec/sessions.md, "Replicas"): the id of the
-- data directory of the replica that ran it (runner.StateHost). Replicas sharing one data
-- directory share the id; a replica on another host (Docker on several hosts) has its own, so
-- a fresh session there says whose the state is instead of falling back silently.
ALTER TABLE llm_sessions ADD COLUMN state_host TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE llm_sessions DROP COLUMN state_host;
