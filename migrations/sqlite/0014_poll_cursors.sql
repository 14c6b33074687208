-- +goose Up
-- SQLite translation of ../0014_poll_cursors.sql: the polling transport's cursor per forge.
CREATE TABLE poll_cursors (
    forge      TEXT PRIMARY KEY,
    since      TIMESTAMP,
    polled_at  TIMESTAMP,
    failed_at  TIMESTAMP,
    error      TEXT NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE poll_cursors;
