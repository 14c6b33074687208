package config

import (
	"time"

	"github.com/alfred-bot/alfred/runner"
)

// Workers tunes the mailbox workers.
type Workers struct {
	// Count is the number of event workers: event passes at once (mailbox.WorkerConfig.Count;
	// beyond the first, only beside passes that have run 50 ms).
	Count int `yaml:"count" env:"COUNT"`
	// LeaseTTL is how long a mailbox lease lives without a heartbeat.
	LeaseTTL time.Duration `yaml:"lease_ttl" env:"LEASE_TTL"`
	// PollInterval is how often an idle worker looks for work.
	PollInterval time.Duration `yaml:"poll_interval" env:"POLL_INTERVAL"`
	// ReconcileInterval is how often open mailboxes are compared with their forge to catch
	// changes whose webhook was lost (spec/reliability.md); default 5m.
	ReconcileInterval time.Duration `yaml:"reconcile_interval" env:"RECONCILE_INTERVAL"`
	// ReconcileBatch bounds the mailboxes compared per forge and interval, and the missed
	// assignments turned into events per forge and pass; default 50.
	ReconcileBatch int `yaml:"reconcile_batch" env:"RECONCILE_BATCH"`
	// PoisonAttempts is how many failed attempts set an event aside, and how many claims of a
	// mailbox that stopped the process block it; default 5.
	PoisonAttempts int `yaml:"poison_attempts" env:"POISON_ATTEMPTS"`
	// Runs is how many agent runs this process makes at once (default 2). Count workers handle
	// events apart from them, so a long run does not delay other issues' reactions.
	Runs int `yaml:"runs" env:"RUNS"`
	// RunsPerProject bounds the agent runs of one repository at once (0, the default: only Runs).
	RunsPerProject int `yaml:"runs_per_project" env:"RUNS_PER_PROJECT"`
}

// HTTP limits the webhook server (spec/edge.md, "Server limits"). A forge sends a delivery in
// one request of a few KiB and waits at most 10 s (GitLab) or 5 s (Gitea) for the answer, so
// the defaults leave ample room for real forges and none for a client that holds a connection.
type HTTP struct {
	// ReadHeaderTimeout bounds reading the request line and headers (default 10s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" env:"READ_HEADER_TIMEOUT"`
	// ReadTimeout bounds reading the whole request, body included (default 30s).
	ReadTimeout time.Duration `yaml:"read_timeout" env:"READ_TIMEOUT"`
	// WriteTimeout bounds a request from the end of its headers to the end of the answer
	// (default 60s; it covers storing the event, which waits for a database connection).
	WriteTimeout time.Duration `yaml:"write_timeout" env:"WRITE_TIMEOUT"`
	// IdleTimeout closes a keep-alive connection idle for this long (default 60s).
	IdleTimeout time.Duration `yaml:"idle_timeout" env:"IDLE_TIMEOUT"`
	// MaxConcurrent is the number of requests handled at once, their bodies read (default
	// 64); more wait for a slot until their read timeout, they are not refused.
	MaxConcurrent int `yaml:"max_concurrent" env:"MAX_CONCURRENT"`
	// MaxReaders is the number of request bodies read at once, before handling (default
	// 1024): a client sending its body slowly holds one of these, not a handling slot.
	MaxReaders int `yaml:"max_readers" env:"MAX_READERS"`
	// MaxBodyMemory caps the bytes of request bodies held in memory at once, being read or
	// waiting for a handling slot (default 64 MiB; at least max_body_bytes is always allowed).
	MaxBodyMemory int64 `yaml:"max_body_memory" env:"MAX_BODY_MEMORY"`
	// MaxHeaderBytes caps the request headers (default 64 KiB).
	MaxHeaderBytes int `yaml:"max_header_bytes" env:"MAX_HEADER_BYTES"`
}

// Database sizes the connection pool of one process (database/sql settings). The pool waits
// for a free connection instead of opening more than MaxOpenConns, so a burst of deliveries
// queues instead of exhausting PostgreSQL's max_connections (100 by default, shared with every
// other client of the server).
type Database struct {
	// MaxOpenConns caps the open connections (default 16).
	MaxOpenConns int `yaml:"max_open_conns" env:"MAX_OPEN_CONNS"`
	// MaxIdleConns is how many connections stay open while idle (default 16, so a steady load
	// never reconnects; database/sql lowers it to MaxOpenConns when that is smaller).
	MaxIdleConns int `yaml:"max_idle_conns" env:"MAX_IDLE_CONNS"`
	// ConnMaxLifetime closes a connection this old (default 30m).
	ConnMaxLifetime time.Duration `yaml:"conn_max_lifetime" env:"CONN_MAX_LIFETIME"`
	// ConnMaxIdleTime closes a connection idle this long (default 5m).
	ConnMaxIdleTime time.Duration `yaml:"conn_max_idle_time" env:"CONN_MAX_IDLE_TIME"`
}

// Admin configures the operator's endpoints: the status endpoints (GET /mailboxes/{id}/session…),
// GET /metrics and the pages under /ui. They show state, branch names, container names and
// worktree paths, so they never share the webhook port: they are served on Listen only, and
// only to requests carrying Token as "Authorization: Bearer …" (the pages also take a login
// with it). With Listen empty they are not served at all.
type Admin struct {
	// Listen is the admin listen address ("127.0.0.1:8081"); empty turns the endpoints off.
	Listen string `yaml:"listen" env:"LISTEN"`
	// Token is the bearer token the admin endpoints require; required with Listen.
	Token Secret `yaml:"token" env:"-"`
	// TokenFile is the file Token was read from, if any (admin.token_file).
	TokenFile string `yaml:"token_file,omitempty" env:"-"`
}

// Runner limits the disposable agent containers.
type Runner struct {
	// UID is the numeric user the agent runs as; never 0.
	UID int `yaml:"uid" env:"UID"`
	// GID is the numeric group the agent runs as.
	GID int `yaml:"gid" env:"GID"`
	// MemoryBytes is the container memory limit.
	MemoryBytes int64 `yaml:"memory_bytes" env:"MEMORY_BYTES"`
	// CPUs is the container CPU limit (1.5 = one and a half cores); NanoCPUs says it in
	// runner.Limits' unit.
	CPUs float64 `yaml:"cpus" env:"CPUS"`
	// PIDs is the container process limit.
	PIDs int64 `yaml:"pids" env:"PIDS"`
	// Timeout bounds one phase.
	Timeout time.Duration `yaml:"timeout" env:"TIMEOUT"`
	// MaxOutputBytes caps the agent output kept from one phase.
	MaxOutputBytes int64 `yaml:"max_output_bytes" env:"MAX_OUTPUT_BYTES"`
	// HostNetwork runs containers on the host network instead of the default bridge (Docker
	// only; refused with the Kubernetes runtime). The host network is outside every egress
	// allowlist: with it, Egress.Mode defaults to EgressOpen and EgressAllowlist is refused.
	HostNetwork bool `yaml:"host_network" env:"HOST_NETWORK"`
	// Egress is where runs may connect to (spec/security.md).
	Egress Egress `yaml:"egress" envPrefix:"EGRESS_"`
	// Runtime is where the agent containers run: RuntimeDocker (the default, the local Docker
	// engine) or RuntimeKubernetes (one Pod per run, see Kubernetes and spec/kubernetes.md).
	Runtime string `yaml:"runtime" env:"RUNTIME"`
	// Kubernetes configures the Kubernetes runtime; read only when Runtime is
	// RuntimeKubernetes.
	Kubernetes Kubernetes `yaml:"kubernetes" envPrefix:"KUBERNETES_"`
	// Instance names this installation among others on the same Docker daemon or in the same
	// runs' namespace: in its containers' and Pods' names and labels, its run networks and its
	// egress NetworkPolicy's name; start-up cleanup removes only what carries it. "" (the
	// default): derived from data_dir (InstanceOf). Two installations that share a daemon or a
	// runs' namespace with the same data_dir path (the deploy kits' /var/lib/alfred) must set
	// different values, or each takes the other's runs for its own leftovers; the replicas of
	// one installation share it. 1 to 12 lowercase letters and digits.
	Instance string `yaml:"instance" env:"INSTANCE"`
}

// InstanceOf is the installation's instance name: Instance, or the one data_dir gives
// (runner.InstanceID, 12 hex digits of the SHA-256 of its absolute path), whose form Instance's
// validation asks for too.
func (r Runner) InstanceOf(dataDir string) string {
	if r.Instance != "" {
		return r.Instance
	}
	return runner.InstanceID(dataDir)
}

// Egress is the runs' egress policy (runner.egress).
type Egress struct {
	// Mode is EgressAllowlist (the default: a run reaches its adapter's provider hosts and
	// Allow, nothing else) or EgressOpen (no restriction). Empty means EgressAllowlist, or
	// EgressOpen with HostNetwork; see Runner.EgressMode.
	Mode string `yaml:"mode" env:"MODE"`
	// Allow are the host:port pairs every run may reach besides its adapter's provider (for
	// example a package registry, "registry.npmjs.org:443", or a local model server,
	// "192.168.1.10:11434"); "*.domain:port" matches every name under domain. On Docker,
	// runs reach them through Alfred's proxy; on Kubernetes Alfred compiles the list into the
	// runs' NetworkPolicy, which holds addresses only (an entry whose host is a name is left
	// out and named by `alfred doctor`).
	Allow []string `yaml:"allow" env:"ALLOW"`
	// SelfContainer is the container (name or id) Alfred runs in on the Docker engine of its
	// runs (Docker runtime only). Empty: found by itself when Alfred runs in one
	// (runner/docker.FindSelf; the compose file relies on it), else Alfred runs on the Docker
	// host. In a container, Alfred joins each run's network and its proxy listens there.
	SelfContainer string `yaml:"self_container" env:"SELF_CONTAINER"`
}

// The modes of Egress.Mode.
const (
	EgressAllowlist = "allowlist"
	EgressOpen      = "open"
)

// NanoCPUs is CPUs in billionths of a CPU (runner.Limits.NanoCPUs: 1e9 = one CPU).
func (r Runner) NanoCPUs() int64 { return int64(r.CPUs * 1e9) }

// EgressMode is the effective egress mode: Egress.Mode, or when it is empty EgressOpen with
// HostNetwork and EgressAllowlist otherwise.
func (r Runner) EgressMode() string {
	switch {
	case r.Egress.Mode != "":
		return r.Egress.Mode
	case r.HostNetwork:
		return EgressOpen
	}
	return EgressAllowlist
}

// The runtimes of Runner.Runtime.
const (
	// RuntimeDocker runs each phase as a container on the Docker engine of the host (runner/docker).
	RuntimeDocker = "docker"
	// RuntimeKubernetes runs each phase as a Pod (runner/kubernetes).
	RuntimeKubernetes = "kubernetes"
)

// Kubernetes is the Kubernetes runtime's side of the installation (spec/kubernetes.md).
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file to use; empty uses the in-cluster configuration (the
	// service account of the Pod Alfred runs in).
	Kubeconfig string `yaml:"kubeconfig" env:"KUBECONFIG"`
	// Namespace holds the runs' Pods, their Secrets and the state claim: a namespace of the
	// runs' own, not Alfred's (deploy/kubernetes: alfred-runs, enforcing Pod Security
	// restricted), where Alfred's Role grants runner/kubernetes.Access.
	Namespace string `yaml:"namespace" env:"NAMESPACE"`
	// StateClaim is the PersistentVolumeClaim (in Namespace) holding data_dir: Alfred mounts it
	// at data_dir, and each run's Pod mounts the run's directories from it as sub-paths (its
	// worktree, input, output and agent session state). Its access mode must let every node
	// that runs Alfred or a run mount it at once (ReadWriteMany; ReadWriteOnce on one node).
	StateClaim string `yaml:"state_claim" env:"STATE_CLAIM"`
	// PullPolicy is the runs' image pull policy: "IfNotPresent" (the default), "Always" or
	// "Never" (images imported into the nodes, no registry).
	PullPolicy string `yaml:"pull_policy" env:"PULL_POLICY"`
	// Requests are what the scheduler reserves for each run's container, in a manifest's
	// quantities: {cpu: 250m, memory: 256Mi}. runner.cpus and runner.memory_bytes stay the
	// limits; a request below its limit lets a run use idle cores beyond its reservation
	// (Kubernetes' Burstable class) while many runs share a node. A resource not named is
	// requested at its limit, so with none named every run's Pod is Guaranteed. Kubernetes
	// refuses a request above its limit; Validate does too.
	Requests map[string]string `yaml:"requests" env:"-"`
	// StartTimeout bounds how long a run's Pod may take to have its agent running: scheduling
	// (a node an autoscaler adds takes minutes), the image's pull and the egress gate's wait.
	// Zero: runner/kubernetes.DefaultStartTimeout (10 minutes). At the bound the run fails
	// with the last reason the Pod gave, and its Pod and Secret are removed.
	StartTimeout time.Duration `yaml:"start_timeout" env:"START_TIMEOUT"`
	// ServiceAccount is the service account the runs' Pods name (default: the namespace's
	// "default"); its token is never mounted into them.
	ServiceAccount string `yaml:"service_account" env:"SERVICE_ACCOUNT"`
	// NodeSelector, Tolerations and Affinity place the runs' Pods (Kubernetes' own fields of
	// a Pod spec, as in a manifest): for example on the one node that mounts a ReadWriteOnce
	// state claim (spec/kubernetes.md). Empty: the scheduler's choice.
	NodeSelector map[string]string `yaml:"node_selector" env:"-"`
	Tolerations  []map[string]any  `yaml:"tolerations" env:"-"`
	Affinity     map[string]any    `yaml:"affinity" env:"-"`
	// EgressGateImage is the image of the init container that holds each run's agent until
	// the runs' NetworkPolicy filters its Pod (runner/kubernetes.EgressGate): Alfred's own
	// image (its entrypoint is the alfred binary, which runs `alfred egress-gate`), the one
	// of Alfred's Deployment. Required with egress mode allowlist.
	EgressGateImage string `yaml:"egress_gate_image" env:"EGRESS_GATE_IMAGE"`
	// EgressGateTarget is the host:port the gate dials, an address off the allowlist that an
	// unfiltered Pod reaches; empty: the cluster's API server (KUBERNETES_SERVICE_HOST).
	EgressGateTarget string `yaml:"egress_gate_target" env:"EGRESS_GATE_TARGET"`
}

// Agent is one coding-agent configuration.
type Agent struct {
	// Name identifies the agent in Phases. Same syntax as a forge name.
	Name string `yaml:"name"`
	// Adapter is the runner/agent adapter: "script", "claude-code", "codex", "opencode",
	// "copilot" or "gemini". Defaults to Name, so `name: script` alone selects the script
	// adapter.
	Adapter string `yaml:"adapter"`
	// Image is the container image the agent runs in.
	Image string `yaml:"image"`
	// Script is the scenario file of the script adapter.
	Script string `yaml:"script,omitempty"`
	// APIKey is the model provider's key, passed only in the container's environment
	// (claude-code: ANTHROPIC_API_KEY; codex: CODEX_API_KEY; opencode: the variable named by
	// APIKeyEnv; copilot: COPILOT_GITHUB_TOKEN; gemini: GEMINI_API_KEY — spec/agents.md).
	APIKey Secret `yaml:"api_key,omitempty"`
	// APIKeyFile is the file APIKey was read from, if any.
	APIKeyFile string `yaml:"api_key_file,omitempty"`
	// Model overrides the adapter's default model.
	Model string `yaml:"model,omitempty"`
	// BaseURL points the CLI at another model endpoint (a proxy): claude-code, codex, gemini;
	// for copilot it selects bring-your-own-key mode with APIKey as the provider's key. An
	// absolute http(s) URL without credentials (they go in the key settings), or refused.
	BaseURL string `yaml:"base_url,omitempty"`
	// APIKeyEnv names the environment variable opencode reads the key from
	// (e.g. ANTHROPIC_API_KEY, OPENAI_API_KEY).
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// MaxTurns bounds the model calls of one API-mode run (anthropic-api, openai-api;
	// default 40).
	MaxTurns int `yaml:"max_turns,omitempty"`
	// MaxTokens bounds the input and output tokens of one API-mode run, summed over its turns
	// (default 2000000).
	MaxTokens int64 `yaml:"max_tokens,omitempty"`
	// MaxToolCalls bounds the tool calls run for one reply of an API-mode run (default 16); the
	// calls beyond it are answered as refused.
	MaxToolCalls int `yaml:"max_tool_calls,omitempty"`
	// Prices maps a model to its price, for the cost of API-mode runs; a model without one is
	// unrated (its cost unknown, never zero).
	Prices map[string]Price `yaml:"prices,omitempty"`
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputUSDPerMTok  float64 `yaml:"input_usd_per_mtok"`
	OutputUSDPerMTok float64 `yaml:"output_usd_per_mtok"`
}

// Adapter names known to the runner.
const (
	AdapterScript     = "script"
	AdapterClaudeCode = "claude-code"
	AdapterCodex      = "codex"
	AdapterOpencode   = "opencode"
	AdapterCopilot    = "copilot"
	AdapterGemini     = "gemini"
	// AdapterAnthropicAPI and AdapterOpenAIAPI are API mode (spec/agents.md, "API mode"):
	// read-only phases through the provider's API, no image, no container.
	AdapterAnthropicAPI = "anthropic-api"
	AdapterOpenAIAPI    = "openai-api"
)
