-- +goose Up
-- SQLite translation of ../0017_operator_sessions.sql (the same statements).
-- Operators' page sessions in the store (spec/security.md, "Operator → the pages"): every
-- replica sharing the store knows every session, and a restart signs nobody out.

-- One row per session. id_hash is the hex SHA-256 of the session's random id (the cookie):
-- the id itself is never stored, so a copy of the database opens no session.
-- token_fingerprint is a hash of the admin token the session was opened with: a session is
-- valid only under the token in force, and a login prunes the sessions of another token and
-- the expired ones. Logout deletes the row.
CREATE TABLE operator_sessions (
    id_hash           TEXT      PRIMARY KEY,
    token_fingerprint TEXT      NOT NULL,
    created_at        TIMESTAMP NOT NULL,
    expires_at        TIMESTAMP NOT NULL,
    last_seen_at      TIMESTAMP NOT NULL
);

CREATE INDEX operator_sessions_expires ON operator_sessions (expires_at);

-- +goose Down
DROP TABLE operator_sessions;
