-- +goose Up
-- Installation-wide controls (spec/operations.md, "Controls"): a drain or a pause set on the
-- pages of one replica reaches every replica sharing the store.

-- One row per control that is on ('drain': no replica claims new work, /readyz answers 503;
-- 'pause': no claim takes any mailbox). No row: the control is off.
CREATE TABLE installation_controls (
    name   TEXT        PRIMARY KEY,
    set_by TEXT        NOT NULL,
    set_at TIMESTAMPTZ NOT NULL
);

-- Each replica (its lease owner) records itself each poll: when it was last seen, whether it
-- drains, and whether it has drained (draining with no pass in progress).
CREATE TABLE replicas (
    id       TEXT        PRIMARY KEY,
    seen_at  TIMESTAMPTZ NOT NULL,
    draining BOOLEAN     NOT NULL DEFAULT FALSE,
    drained  BOOLEAN     NOT NULL DEFAULT FALSE
);

-- +goose Down
DROP TABLE replicas;
DROP TABLE installation_controls;
