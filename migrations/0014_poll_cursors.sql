-- +goose Up
-- The polling transport's cursor per forge (spec/transport.md): the forge's time from which the
-- next poll asks what changed for the bot, moved only once the changes of a poll are stored;
-- when the last poll succeeded, and the last failure (kept until a poll succeeds again).
CREATE TABLE poll_cursors (
    forge      TEXT PRIMARY KEY,
    since      TIMESTAMPTZ,
    polled_at  TIMESTAMPTZ,
    failed_at  TIMESTAMPTZ,
    error      TEXT NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE poll_cursors;
