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
// The example tag is shown in error messages.
type spec struct {
	Scopes          []string `split_words:"true" example:"org:acme,repo:acme/web,enterprise:acme-corp"`
	Namespaces      []string `split_words:"true" example:"arc-runners,arc-runners-gpu"`
	PodSelector     string   `split_words:"true" default:"actions-ephemeral-runner=True" example:"app.kubernetes.io/component=runner"`
	RunnerContainer string   `split_words:"true" default:"runner" example:"runner"`
	RunnerNameFrom  string   `split_words:"true" default:"pod-name" example:"annotation:runners.example.com/github-name"`
	ScopeLabel      string   `split_words:"true" example:"runners.example.com/github-scope"`
	JobFrom         string   `split_words:"true" example:"annotation:pool.example.com/job"`

	OwnerStampLabel string        `split_words:"true" example:"pool.example.com/claimed-by"`
	StampMaxAge     time.Duration `split_words:"true" default:"10m" example:"10m"`
	GhostNamePrefix string        `split_words:"true" example:"arc-runners-"`
	GhostLabel      string        `split_words:"true" example:"reaper-owned"`

	ArcLeaks              bool          `split_words:"true" default:"false" example:"true"`
	ArcFailedAfter        time.Duration `split_words:"true" default:"10m" example:"10m"`
	ArcPodlessAfter       time.Duration `split_words:"true" default:"10m" example:"10m"`
	ArcStuckDeletingAfter time.Duration `split_words:"true" default:"30m" example:"30m"`
	ArcRemoveFinalizers   bool          `split_words:"true" default:"false" example:"true"`

	RegistrationDeadline  time.Duration `split_words:"true" default:"10m" example:"10m"`
	ConfirmAfter          time.Duration `split_words:"true" default:"5m" example:"5m"`
	MaxActions            int           `split_words:"true" default:"10" example:"10"`
	MaxFraction           float64       `split_words:"true" default:"0.25" example:"0.25"`
	MassSuspicionFraction float64       `split_words:"true" default:"0.5" example:"0.5"`
	MassSuspicionMin      int           `split_words:"true" default:"5" example:"5"`
	DryRun                bool          `split_words:"true" default:"false" example:"true"`
	Ledger                string        `split_words:"true" example:"configmap:runner-reaper/runner-reaper-ledger"`
	EksCluster            string        `split_words:"true" example:"build-fleet"`
	MetricsNamespace      string        `split_words:"true" example:"RunnerReaper"`
	PushgatewayUrl        string        `split_words:"true" example:"http://pushgateway.monitoring:9091"`
	MetricsInstance       string        `split_words:"true" example:"runner-reaper-eu"`
	DeleteServiceAccount  bool          `split_words:"true" default:"false" example:"true"`
	KubeConcurrency       int           `split_words:"true" default:"4" example:"4"`
	KubeTimeout           time.Duration `split_words:"true" default:"30s" example:"30s"`
	SweepTimeout          time.Duration `split_words:"true" default:"45s" example:"45s"`
	MaxScopesPerSweep     int           `split_words:"true" default:"0" example:"50"`
	LogLevel              string        `split_words:"true" default:"info" example:"debug"`

	GithubToken          string        `split_words:"true" example:"ghp_xxxxxxxxxxxxxxxxxxxx"`
	GithubAppId          int64         `split_words:"true" example:"123456"`
	GithubInstallationId int64         `split_words:"true" example:"7890123"`
	GithubPrivateKey     string        `split_words:"true" example:"\"$(cat app-private-key.pem)\""`
	GithubPrivateKeyFile string        `split_words:"true" example:"/var/run/secrets/github/private-key.pem"`
	GithubSecretArn      string        `split_words:"true" example:"arn:aws:secretsmanager:eu-west-1:123456789012:secret:runner-reaper-github-AbCdEf"`
	GithubApiUrl         string        `split_words:"true" default:"https://api.github.com/" example:"https://ghes.example.com/api/v3/"`
	GithubTimeout        time.Duration `split_words:"true" default:"30s" example:"30s"`
}
