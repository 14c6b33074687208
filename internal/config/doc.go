// Package config loads, validates and renders Alfred's configuration.
//
// Load builds a Config in four layers, each over the one before:
//
//  1. defaults (Default);
//  2. the YAML file, alfred.yaml by default (deploy/alfred.example.yaml documents every key;
//     unknown keys are errors);
//  3. the ALFRED_* environment variables below (an empty variable counts as unset);
//  4. derived defaults (forges[].git_user, agents[].adapter, phases.default), then Validate.
//
// A missing file is fine when the environment supplies everything that is required.
//
// # Secrets
//
// database_url, admin.token, forges[].token, forges[].webhook_secret and agents[].api_key are
// of type Secret, which renders as [redacted] in fmt, JSON, YAML, text encoders and log/slog.
// Each can also be read from a file: <key>_file in YAML (a relative path is relative to the
// YAML file) or <VARIABLE>_FILE in the environment (relative to the working directory). The file's
// trailing newline is dropped. Setting a value and its file in the same layer is an error; an
// environment variable (value or _FILE) replaces what the YAML file said. (*Config).Secrets
// lists every value; (*Config).Censor builds the internal/base/censor.Censor that hides them (and
// their base64 and HTTP Basic forms) in every text Alfred writes; (*Config).Dump renders the
// effective configuration without them.
//
// # Environment variables
//
// Outside the lists forges and agents, every setting has one variable: ALFRED_ followed by its
// YAML path upper-cased, '.' becoming '_' (runner.egress.mode → ALFRED_RUNNER_EGRESS_MODE),
// except the settings named under "Not from the environment" below. Durations are in Go syntax
// such as 90s; runner.egress.allow is comma-separated (parsing: github.com/caarlos0/env).
// The variables:
//
//	ALFRED_LISTEN                          listen
//	ALFRED_PUBLIC_URL                      public_url
//	ALFRED_DATABASE_URL, _FILE             database_url (secret)
//	ALFRED_DATA_DIR                        data_dir
//	ALFRED_MAX_BODY_BYTES                  max_body_bytes
//	ALFRED_RETENTION_DAYS                  retention_days
//	ALFRED_HTTP_<KEY>                      http.<key>: READ_HEADER_TIMEOUT, READ_TIMEOUT,
//	                                       WRITE_TIMEOUT, IDLE_TIMEOUT, MAX_CONCURRENT,
//	                                       MAX_READERS, MAX_BODY_MEMORY, MAX_HEADER_BYTES
//	ALFRED_DATABASE_<KEY>                  database.<key>: MAX_OPEN_CONNS, MAX_IDLE_CONNS,
//	                                       CONN_MAX_LIFETIME, CONN_MAX_IDLE_TIME
//	ALFRED_ADMIN_LISTEN                    admin.listen
//	ALFRED_ADMIN_TOKEN, _FILE              admin.token (secret)
//	ALFRED_LABELS_<KEY>                    labels.<key>: FUNCTIONAL_ANALYSIS, WAITING_INFO,
//	                                       TECHNICAL_ANALYSIS, WAITING_VALIDATION,
//	                                       IN_DEVELOPMENT, IN_CI, IN_REVIEW, BLOCKED, DONE,
//	                                       TYPE_TASK, TYPE_BUG, TYPE_ANALYSIS, TYPE_QUESTION,
//	                                       VALIDATE_PLAN, RETRY, RETRY_ONCE,
//	                                       RETRY_UNTIL_GREEN, AUTO_MERGE
//	ALFRED_LIFECYCLE_<KEY>                 lifecycle.<key>: QUESTION_DEADLINE, CI_WAIT,
//	                                       CI_POLL, CI_FIX_ATTEMPTS, REVIEW_FIX_ATTEMPTS,
//	                                       RETRY_UNTIL_GREEN_MAX, REVIEW_QUIET,
//	                                       REVIEW_VERDICTS, AUTO_MERGE, MERGE_METHOD,
//	                                       AUTO_MERGE_MIN_APPROVALS, SHADOW, BRANCH_PREFIX,
//	                                       BUDGET_USD, GIT_NAME, GIT_EMAIL
//	ALFRED_PERMISSIONS_<KEY>               permissions.<key>: STEER_LABEL, STATE_LABEL,
//	                                       ANSWER, COMMAND, ASSIGN, UNASSIGN, REVIEW,
//	                                       APPROVAL, CACHE
//	ALFRED_WORKERS_<KEY>                   workers.<key>: COUNT, LEASE_TTL, POLL_INTERVAL,
//	                                       RECONCILE_INTERVAL, RECONCILE_BATCH,
//	                                       POISON_ATTEMPTS, RUNS, RUNS_PER_PROJECT
//	ALFRED_RUNNER_<KEY>                    runner.<key>: UID, GID, MEMORY_BYTES, CPUS, PIDS,
//	                                       TIMEOUT, MAX_OUTPUT_BYTES, HOST_NETWORK, RUNTIME,
//	                                       INSTANCE
//	ALFRED_RUNNER_EGRESS_<KEY>             runner.egress.<key>: MODE, ALLOW
//	                                       (host:port,host:port), SELF_CONTAINER
//	ALFRED_RUNNER_KUBERNETES_<KEY>         runner.kubernetes.<key>: KUBECONFIG, NAMESPACE,
//	                                       STATE_CLAIM, PULL_POLICY, START_TIMEOUT,
//	                                       SERVICE_ACCOUNT, EGRESS_GATE_IMAGE,
//	                                       EGRESS_GATE_TARGET
//	ALFRED_SESSIONS_AGENT_SESSION_RESUME   sessions.agent_session_resume
//	ALFRED_SELF_REVIEW_<KEY>               self_review.<key>: ENABLED, MAX_ROUNDS, AFTER_FIXES
//	ALFRED_PHASES_<PHASE>                  phases.<phase> (merged), e.g. ALFRED_PHASES_DEFAULT
//
// Forges and agents are lists keyed by name. NAME is the entry's name upper-cased with every
// character other than a letter or digit replaced by '_' (EnvName: "my-forge" → MY_FORGE):
//
//	ALFRED_FORGES_<NAME>_TOKEN, _FILE            forges[name].token (secret)
//	ALFRED_FORGES_<NAME>_WEBHOOK_SECRET, _FILE   forges[name].webhook_secret (secret)
//	ALFRED_FORGES_<NAME>_KIND                    forges[name].kind
//	ALFRED_FORGES_<NAME>_BASE_URL                forges[name].base_url
//	ALFRED_FORGES_<NAME>_BOT_USER                forges[name].bot_user
//	ALFRED_FORGES_<NAME>_OTHER_BOTS              forges[name].other_bots, comma-separated
//	ALFRED_FORGES_<NAME>_TRANSPORT               forges[name].transport: webhook, poll or both (comma-separated list)
//	ALFRED_FORGES_<NAME>_POLL_INTERVAL           forges[name].poll_interval (duration, default 15s)
//	ALFRED_FORGES_<NAME>_GIT_USER                forges[name].git_user
//	ALFRED_FORGES_<NAME>_MAX_COMMENT_BYTES       forges[name].max_comment_bytes
//	ALFRED_FORGES_<NAME>_MAX_DESCRIPTION_BYTES   forges[name].max_description_bytes
//	ALFRED_AGENTS_<NAME>_API_KEY, _FILE          agents[name].api_key (secret)
//	ALFRED_AGENTS_<NAME>_ADAPTER                 agents[name].adapter
//	ALFRED_AGENTS_<NAME>_IMAGE                   agents[name].image
//	ALFRED_AGENTS_<NAME>_SCRIPT                  agents[name].script
//	ALFRED_AGENTS_<NAME>_MODEL                   agents[name].model
//
// A NAME that matches no entry of the file declares a new entry named strings.ToLower(NAME),
// so a deployment can be configured from the environment alone. An unknown variable under
// ALFRED_FORGES_ or ALFRED_AGENTS_ is an error.
//
// Not from the environment (YAML only): scopes, sessions.overrides, runner.kubernetes.requests,
// runner.kubernetes.node_selector, runner.kubernetes.tolerations, runner.kubernetes.affinity;
// forges[].repositories and forges[].projects; agents[].base_url, agents[].api_key_env,
// agents[].max_turns, agents[].max_tokens, agents[].max_tool_calls and agents[].prices.
//
// Errors name the offending key (a YAML path such as forges[1].base_url, or a variable), never
// a secret value.
package config
