// Package config reads runner-reaper's configuration from the environment
// and validates all of it before anything is listed or deleted. Every
// message names the variable, what is wrong with it, and a right example.
package config

import "time"

// Prefix starts every variable the reaper reads.
const Prefix = "REAPER"

// spec is the environment as envconfig reads it. Field names are spelled so
// that split_words yields the documented variable names: envconfig's own
// `envconfig:"NAME"` tag is avoided on purpose, because it also reads the
// bare, unprefixed NAME, and a stray DRY_RUN or NAMESPACES in a pod's
// environment must never steer a tool that deletes things.
//
// Each field's comment is its description in docs/configuration.md, which
// `make docs` writes from this file: Markdown, its links relative to docs/.
// A last paragraph "Default: ..." says what leaving the variable unset means
// where no default tag gives a value. The example tag is shown in error
// messages and in the document.
type spec struct {
	// GitHub scopes, comma-separated: `repo:OWNER/NAME`, `org:NAME`,
	// `enterprise:SLUG`. Names follow GitHub's rules (letters, digits, `-`,
	// `_`; `.` too in a repository name); `.` and `..` are refused.
	//
	// Default: required
	Scopes []string `split_words:"true" example:"org:acme,repo:acme/web,enterprise:acme-corp"`
	// Namespaces of the runner pods, comma-separated, or `*` for all. A named
	// namespace that does not exist makes every sweep exit 3 with no ghost
	// verdicts ([safety rule 12](design.md#safety-rules)).
	//
	// Default: required
	Namespaces []string `split_words:"true" example:"arc-runners,arc-runners-gpu"`
	// Label selector of the runner pods; needs at least one positive
	// requirement (`key`, `key=v`, `key in (...)`).
	PodSelector string `split_words:"true" default:"actions-ephemeral-runner=True" example:"app.kubernetes.io/component=runner"`
	// The runner container's name; a pod without it is not a runner and is
	// never judged.
	RunnerContainer string `split_words:"true" default:"runner" example:"runner"`
	// Where the GitHub runner name comes from: `pod-name`, `label:KEY` or
	// `annotation:KEY`.
	RunnerNameFrom string `split_words:"true" default:"pod-name" example:"annotation:runners.example.com/github-name"`
	// A label whose value names the pod's scope (an org, enterprise slug or
	// repository name among `REAPER_SCOPES`). By default ARC's
	// `actions.github.com/organization`, `/repository`, `/enterprise` labels,
	// or the one scope when only one is configured.
	//
	// Default: ARC's labels
	ScopeLabel string `split_words:"true" example:"runners.example.com/github-scope"`
	// `annotation:KEY`: the annotation in which a pool's dispatcher writes the
	// job it gave the runner, `OWNER/REPO/RUN_ID[/JOB_ID]`; the job guard asks
	// GitHub about that job before acting on the runner (ARC's
	// EphemeralRunners say it themselves). A label cannot hold the `/` and is
	// refused.
	JobFrom string `split_words:"true" example:"annotation:pool.example.com/job"`
	// Before acting on a running runner of which no job is recorded (ARC's
	// EphemeralRunner, `REAPER_JOB_FROM`), read the last 50 lines (at most
	// 16 KiB) of its runner container's log, one request per runner about to
	// be acted on: a `Running job: NAME` line with no `Job NAME completed
	// with result` after it leaves the runner alone (`protected-job`). A log
	// that cannot be read, or says neither, changes nothing. Needs `get` on
	// `pods/log` (`components/runner-log`, which the kustomize base includes;
	// the chart's `runnerLog.enabled`); without it the sweep warns `runner
	// logs not readable` once and goes on without the read.
	ReadRunnerLog bool `split_words:"true" default:"true" example:"false"`

	// The pool's owner-stamp (claimed) label key; empty turns `orphan-stamped`
	// off.
	//
	// Default: off
	OwnerStampLabel string `split_words:"true" example:"pool.example.com/claimed-by"`
	// How long a stamp may stand with no live claim.
	StampMaxAge time.Duration `split_words:"true" default:"10m" example:"10m"`
	// Registrations whose name starts with this are this deployment's; at
	// least 3 characters.
	//
	// Default: off
	GhostNamePrefix string `split_words:"true" example:"arc-runners-"`
	// Registrations carrying this runner label are this deployment's; never
	// one of GitHub's default labels (`self-hosted`, `linux`, `x64`, ...).
	//
	// Default: off
	GhostLabel string `split_words:"true" example:"reaper-owned"`

	// List ARC's EphemeralRunners: ARC's own leaks, runner ids, jobs, and any
	// action on a scale-set runner, which is otherwise only reported (needs
	// `components/arc`).
	ArcLeaks bool `split_words:"true" default:"false" example:"true"`
	// How long an EphemeralRunner may stay `Failed`.
	ArcFailedAfter time.Duration `split_words:"true" default:"10m" example:"10m"`
	// How long an EphemeralRunner may have no pod.
	ArcPodlessAfter time.Duration `split_words:"true" default:"10m" example:"10m"`
	// How long a deleted EphemeralRunner may wait on its finalizers before it
	// is reported.
	ArcStuckDeletingAfter time.Duration `split_words:"true" default:"30m" example:"30m"`
	// Remove ARC's finalizers (`ephemeralrunner.actions.github.com/finalizer`
	// and `.../runner-registration-finalizer`, by name, never another
	// controller's) of a stuck EphemeralRunner whose registration finalizer
	// still waits and whose registration is not known to be gone
	// (`components/arc-finalizers`); ARC's registration finalizer alone is
	// released without it, with proof. An object another controller's
	// finalizer still holds is reported with its names.
	ArcRemoveFinalizers bool `split_words:"true" default:"false" example:"true"`

	// How long a running pod may go without its runner appearing on GitHub.
	RegistrationDeadline time.Duration `split_words:"true" default:"10m" example:"10m"`
	// How long a runner pod's runner container may go without starting
	// before it is `never-started`: an image that cannot be pulled, a
	// missing secret, an init container that does not finish, a volume that
	// never mounts, no node with room. It counts from when the pod was
	// scheduled onto a node, so time spent waiting for a node does not
	// count (a pod with no node counts from its creation). A slow start is
	// judged as a fault is: a runner image that takes longer than this to
	// pull needs a longer deadline, since `confirm-after` is all that
	// follows it. Above 0.
	StartDeadline time.Duration `split_words:"true" default:"15m" example:"15m"`
	// Delete a `never-started` runner pod that waits only for room in the
	// cluster (`Unschedulable`, or a scheduling gate), too. Off, it is
	// reported and left: deleting it frees nothing, and its controller
	// would make another at once.
	DeleteUnschedulable bool `split_words:"true" default:"false" example:"true"`
	// How long a GitHub-based verdict must hold before it acts.
	ConfirmAfter time.Duration `split_words:"true" default:"5m" example:"5m"`
	// Most actions per sweep.
	MaxActions int `split_words:"true" default:"10" example:"10"`
	// Largest share of the managed pods one sweep may remove: a number above 0
	// and at most 1 (NaN and infinities are refused, here and below).
	MaxFraction float64 `split_words:"true" default:"0.25" example:"0.25"`
	// Share of a scope's pods newly suspect that raises the alarm.
	MassSuspicionFraction float64 `split_words:"true" default:"0.5" example:"0.5"`
	// Fewest newly suspect pods that raise the alarm.
	MassSuspicionMin int `split_words:"true" default:"5" example:"5"`
	// Mark, confirm, re-check and pre-flight like a real sweep; delete nothing
	// (same as `sweep --dry-run`).
	DryRun bool `split_words:"true" default:"false" example:"true"`
	// Where marks, list ETags and the record of actions live:
	// `configmap:NAMESPACE/NAME`, `dynamodb:TABLE`, `file:PATH` or `memory`. A
	// ConfigMap save changes only the reaper's own keys (`marks.json`,
	// `saves`, `next-scope`, `streaks.json`, `history.json`, `loops.json`,
	// `lists.json.gz` and its two labels); other labels, annotations and data
	// keys are kept. A `file:` ledger must be runner-reaper's own
	// (`{"format":6,"version":N,"ledger":{...}}`, indented, each scope's list
	// cache, each record and each group's reap-loop window on one line;
	// format 1 to 5 files are read, and saved as format 6 while the
	// reap-loop window holds a group, as format 5 while it holds none): a
	// file of any other shape stops the sweep with exit 1 naming the file,
	// and is left untouched. Format 2 added each mark's `first_seen_local`,
	// format 3 its `job_checked_at`, format 4 the ledger's streaks, format 5
	// its `history`, format 6 its `loops`; a runner-reaper from before a
	// file's format cannot read it and says it was written by a newer
	// runner-reaper, so going back to one means removing the file (its marks
	// start again), or, to the release before format 6, waiting until no
	// reap loop's window holds an action. A list cache that cannot be read is dropped with the
	// warning `ledger list cache dropped` and the lists are read afresh; a
	// record of actions likewise, with `ledger history dropped`, and a
	// reap-loop window with `ledger reap-loop window dropped`; unreadable
	// marks are an error (exit 1, nothing written).
	//
	// Default: in a pod: `configmap:<own namespace>/runner-reaper-ledger`;
	// else `file:runner-reaper-ledger.json`
	Ledger string `split_words:"true" example:"configmap:runner-reaper/runner-reaper-ledger"`
	// How many records of actions done the ledger keeps, the newest, 0 to
	// 1000: for each registration or object a sweep really deleted, or
	// finalizer it released, when (the API server's clock), the verdict and
	// its evidence, the object, pod, runner and the job it held, and what
	// each write answered; `runner-reaper history` prints them. Dry runs and
	// audits record nothing. A record is about a kilobyte; over the
	// ledger's size limit the oldest go before the streaks and marks, and
	// after the list cache, except that those beyond the newest 20 go first
	// where that keeps every scope's list cache. `0` records nothing, and
	// the next real sweep (not a dry run or an audit) clears the record.
	HistorySize int `split_words:"true" default:"200" example:"200"`
	// How many actions on one group's runner pods (what made them: ARC's
	// scale set, a RunnerDeployment or RunnerSet, the pods' controller,
	// else their `generateName`), with one fingerprint (a terminal pod's
	// exit class, a never-started pod's waiting reason, else the verdict)
	// within `REAPER_LOOP_WINDOW`, make a reap loop, 2 to 50: a broken
	// template, reported with a warning `reap loop`, an Event on what
	// makes the pods, a metric and an alert. While it stands, of the
	// group's `never-started`, `unregistered` and `zombie` runners one
	// acts a sweep (the others are `loop-held`); its terminal pods still
	// go ([design](design.md#reap-loops)).
	LoopThreshold int `split_words:"true" default:"5" example:"5"`
	// How far back a reap loop's actions are counted, `1m` to `24h`; the
	// ledger keeps each group's actions this long (at most twice
	// `REAPER_LOOP_THRESHOLD` of them, and 64 groups, those acted on
	// last).
	LoopWindow time.Duration `split_words:"true" default:"30m" example:"30m"`
	// Reach this EKS cluster from outside (DescribeCluster and an IAM token).
	EksCluster string `split_words:"true" example:"build-fleet"`
	// Write CloudWatch EMF metric lines under this namespace.
	//
	// Default: off
	MetricsNamespace string `split_words:"true" example:"RunnerReaper"`
	// Push each sweep's metrics to this Prometheus Pushgateway
	// (`http(s)://HOST:PORT`, no `user:password@`, query or fragment) at its
	// end; see [metrics.md](metrics.md).
	//
	// Default: off
	PushgatewayUrl string `split_words:"true" example:"http://pushgateway.monitoring:9091"`
	// The `instance` of the push's grouping key, 1 to 63 of letters, digits,
	// `.`, `_`, `-`: give each shard its own (two shards never share a ledger,
	// so the default already differs).
	//
	// Default: the ledger's name (`REAPER_LEDGER`'s form)
	MetricsInstance string `split_words:"true" example:"runner-reaper-eu"`
	// Also delete a reaped bare pod's same-named ServiceAccount, only when the
	// pod ran as it (never `default`).
	DeleteServiceAccount bool `split_words:"true" default:"false" example:"true"`
	// Parallel Kubernetes deletes (GitHub deletes are always serial).
	KubeConcurrency int `split_words:"true" default:"4" example:"4"`
	// Per Kubernetes request, from dialling to the last byte of the answer
	// (for the pod watch-list, to its end bookmark: about 40 ms per 1,000 pods
	// on loopback), at most `5m`. An API server that does not answer in time
	// fails the sweep: "no answer from the Kubernetes API within 30s" (exit
	// 1); a watch-list that began but has not reached its end in time is given
	// up, with a warning, for pages.
	KubeTimeout time.Duration `split_words:"true" default:"30s" example:"30s"`
	// The whole process's deadline, counted from its start, the push of the
	// metrics included: above `5s`, at most `1h`; keep it below the CronJob's
	// `activeDeadlineSeconds` (50). A sweep that pushes its metrics keeps back
	// the push's 3.5 s (at most a quarter of the timeout) from its own
	// deadline; a push left under a quarter of a second is dropped with the
	// warning `push metrics dropped`. In the last 5 s before it no action
	// starts; the action in flight finishes; the rest are `not-reached` (exit
	// 3). Observation still running at the deadline fails the sweep: nothing
	// is saved or deleted (exit 1). In the Lambda the sooner of it and the
	// invocation's deadline wins. `runner-reaper history` ends within it too,
	// with exit 1, when the ledger does not answer.
	SweepTimeout time.Duration `split_words:"true" default:"45s" example:"45s"`
	// Most GitHub scopes one sweep lists, 0 to 10000; the others are deferred
	// to the next sweeps in a fair rotation whose position (the next scope) is
	// kept in the ledger. `0` lists every scope that fits the deadline:
	// listing starts no new scope once less than max(`REAPER_SWEEP_TIMEOUT`/3,
	// 10 s), plus the longest list so far, remains. The first scope is always
	// listed (see docs/operating.md, Size and scale).
	MaxScopesPerSweep int `split_words:"true" default:"0" example:"50"`
	// `debug`, `info`, `warn` or `error`: filters the diagnostics only; the
	// action lines and the summary are written at every level.
	LogLevel string `split_words:"true" default:"info" example:"debug"`

	// A token with admin on the scopes (enterprise scopes need a classic PAT
	// with `manage_runners:enterprise`), and read access to Actions on the
	// repositories whose jobs the runners run, for the job guard; printable
	// ASCII only.
	GithubToken string `split_words:"true" example:"ghp_xxxxxxxxxxxxxxxxxxxx"`
	// GitHub App auth, instead of a token: the App's id, with
	// `REAPER_GITHUB_INSTALLATION_ID` and the App's private key.
	GithubAppId int64 `split_words:"true" example:"123456"`
	// GitHub App auth, instead of a token: the installation's id, with
	// `REAPER_GITHUB_APP_ID` and the App's private key.
	GithubInstallationId int64 `split_words:"true" example:"7890123"`
	// The App's PEM private key, inline; or else its path in
	// `REAPER_GITHUB_PRIVATE_KEY_FILE`, not both. An enterprise scope with App
	// auth is refused: GitHub does not accept installation tokens there.
	GithubPrivateKey string `split_words:"true" example:"\"$(cat app-private-key.pem)\""`
	// The App's PEM private key, as a path; or else inline in
	// `REAPER_GITHUB_PRIVATE_KEY`, not both. An enterprise scope with App auth
	// is refused: GitHub does not accept installation tokens there.
	GithubPrivateKeyFile string `split_words:"true" example:"/var/run/secrets/github/private-key.pem"`
	// Read the token (or, with App auth, the PEM key) from this Secrets
	// Manager secret at start-up.
	GithubSecretArn string `split_words:"true" example:"arn:aws:secretsmanager:eu-west-1:123456789012:secret:runner-reaper-github-AbCdEf"`
	// The API base (GitHub Enterprise Server: `https://HOST/api/v3/`).
	// `https`, or plain `http` only to loopback; no `user:password@`, query or
	// fragment. Credentials go to this origin (scheme, host, port) only;
	// redirects elsewhere are refused.
	GithubApiUrl string `split_words:"true" default:"https://api.github.com/" example:"https://ghes.example.com/api/v3/"`
	// Per GitHub request, at most `5m`.
	GithubTimeout time.Duration `split_words:"true" default:"30s" example:"30s"`

	// The time from one sweep's start to the next one's in `runner-reaper
	// serve`, the long-running mode: at least `10s`, and longer than
	// `REAPER_SWEEP_TIMEOUT`, so that a sweep always ends before the next is
	// due (`serve` refuses to start otherwise). The leader sweeps at once when
	// it starts leading, and only once its watches have synced. A sweep or
	// an audit reads it only to check its form.
	Interval time.Duration `split_words:"true" default:"1m" example:"1m"`
	// Where `serve` answers `/metrics`, `/healthz` and `/readyz`: `HOST:PORT`,
	// the host an IP address, a host name or empty for every interface, the
	// port 1 to 65535.
	Listen string `split_words:"true" default:":8080" example:"127.0.0.1:8080"`
	// The Lease `serve`'s replicas elect their leader on, a DNS subdomain name
	// (lower-case letters, digits, `-` and `.`); only the leader sweeps.
	LeaseName string `split_words:"true" default:"runner-reaper" example:"runner-reaper-eu"`
	// The Lease's namespace.
	//
	// Default: in a pod: its own namespace; else `serve` requires it
	LeaseNamespace string `split_words:"true" example:"runner-reaper"`
	// How long the Lease holds without being renewed, in whole seconds, `3s`
	// to `5m`. The leader renews it every two fifteenths of it and gives up
	// leading when it could not for two thirds of it (client-go's leader
	// election); the sweep it was running then stops as on SIGTERM. A
	// replica takes a released Lease at its next try (every two fifteenths),
	// and one left by a leader that died once it has gone unrenewed this
	// long. A lost term is never released, and the replica that takes
	// such a Lease over waits 20 s, the bound on a stopped sweep's action
	// in flight and its ledger save, before its first sweep.
	LeaseDuration time.Duration `split_words:"true" default:"15s" example:"15s"`
	// The prefix of this process's name in the Lease (`holderIdentity`): 1 to
	// 128 printable ASCII characters without spaces. `_` and a random suffix
	// are always added, so that each process is a holder of its own, even
	// two given the same prefix or a container restarted in place.
	//
	// Default: the host name (a pod's name)
	Identity string `split_words:"true" example:"runner-reaper-7d9f8-x2k4q"`
}
