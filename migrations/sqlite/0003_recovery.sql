-- +goose Up
-- SQLite translation of ../0003_recovery.sql.
-- Recovery after a restart: a run finished by the start-up recovery is recorded with its
-- outcome but not yet acted on by the mailbox machine (applied = FALSE) until the machine next
-- steps; the commit a recovered read-write run pushed; the session hook of an interrupted run;
-- and the adapter of each executor, so a restarted Alfred reads the result with it.
ALTER TABLE runs ADD COLUMN applied BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE runs ADD COLUMN head_sha TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN resumable BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE runs ADD COLUMN not_resumable_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE executors ADD COLUMN adapter TEXT NOT NULL DEFAULT '';
CREATE INDEX executors_run ON executors (run_id, id);

-- +goose Down
DROP INDEX executors_run;
ALTER TABLE executors DROP COLUMN adapter;
ALTER TABLE runs DROP COLUMN not_resumable_reason;
ALTER TABLE runs DROP COLUMN resumable;
ALTER TABLE runs DROP COLUMN head_sha;
ALTER TABLE runs DROP COLUMN applied;
