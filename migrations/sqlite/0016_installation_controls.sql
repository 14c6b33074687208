-- +goose Up
-- SQLite translation of ../0011_installation_controls.sql (the same statements).
-- Installation-wide controls (spec/operations.md, "Controls"): a drain or a pause set on the
-- pages of one replica reaches every replica sharing the store.

-- One row per control that is on ('drain': no replica claims new work, /readyz answers 503;
-- 'pause': no claim takes any mailbox). No row: the control is off.
CREATE TABLE installation_controls (
    name   TEXT      PRIMARY KEY,
    set_by TEXT      NOT NULL,
    set_at TIMESTAMP NOT NULL
);

-- Each replica (its lease owner) records itself each poll: when it was last seen, whether it
-- drains, and whether it has drained (draining with no pass in progress).
CREATE TABLE replicas (
    id       TEXT      PRIMARY KEY,
    seen_at  TIMESTAMP NOT NULL,
    draining BOOLEAN   NOT NULL DEFAULT FALSE,
    drained  BOOLEAN   NOT NULL DEFAULT FALSE
);

-- +goose Down
DROP TABLE replicas;
DROP TABLE installation_controls;
