-- +goose Up
-- A delivery is a duplicate only by its forge's delivery identity (GitLab Idempotency-Key,
-- Forgejo/Gitea X-*-Delivery). Two deliveries with identical bodies under different ids are
-- two real events (assign, unassign, assign within a second): both are kept. The same id with
-- a different body is kept too (and logged by the store). Events derived by reconciliation
-- carry a delivery id of their own ("reconcile:…").
ALTER TABLE events DROP CONSTRAINT events_forge_body_hash_key;
ALTER TABLE events DROP CONSTRAINT events_forge_delivery_id_key;
ALTER TABLE events ADD CONSTRAINT events_forge_delivery_body_key UNIQUE (forge, delivery_id, body_hash);

-- +goose Down
ALTER TABLE events DROP CONSTRAINT events_forge_delivery_body_key;
ALTER TABLE events ADD CONSTRAINT events_forge_delivery_id_key UNIQUE (forge, delivery_id);
ALTER TABLE events ADD CONSTRAINT events_forge_body_hash_key UNIQUE (forge, body_hash);
