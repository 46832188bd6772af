// Package deploy_test proves the AWS SAM template at the repository's root
// (template.yaml) and the Kubernetes side of the Lambda's access
// (k8s-cronjob/components/lambda-access): every property the issue asks of
// the scheduled Lambda is checked here, so a change that breaks one fails.
package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/memlimit"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	functionID  = "ReaperFunction"
	roleID      = "ReaperFunctionRole"
	tableID     = "LedgerTable"
	accessID    = "ReaperAccessEntry"
	lambdaGroup = "runner-reaper-lambda"
	cronjobRole = "runner-reaper"
	runnersNS   = "arc-runners"
	bindingName = "runner-reaper-lambda"
	// runnerLogRBAC names components/runner-log's Role and RoleBinding.
	runnerLogRBAC = "runner-reaper-runner-log"
	clusterArnFn  = "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:cluster/${ClusterName}"
)

// ---------------------------------------------------------------------------
// Reading the template: CloudFormation's short tags (!Ref, !Sub, !If,
// !GetAtt, ...) become their long forms ({"Ref": x}, {"Fn::Sub": x}), so the
// rest of the test sees one shape whichever form the template uses.

type obj = map[string]any

func loadTemplate(t *testing.T) obj {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(b, &doc))
	v, err := fromNode(&doc)
	require.NoError(t, err)
	tpl, ok := v.(obj)
	require.True(t, ok, "template.yaml is a mapping")
	return tpl
}

func fromNode(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: want one document", n.Line)
		}
		return fromNode(n.Content[0])
	case yaml.AliasNode:
		return fromNode(n.Alias)
	case yaml.MappingNode:
		m := obj{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("line %d: key %q twice", n.Content[i].Line, k)
			}
			val, err := fromNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k] = val
		}
		v = m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			val, err := fromNode(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if isIntrinsicTag(n.Tag) {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	if !isIntrinsicTag(n.Tag) {
		return v, nil
	}
	name := strings.TrimPrefix(n.Tag, "!")
	switch name {
	case "Ref", "Condition":
		return obj{name: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q is not RESOURCE.ATTRIBUTE", n.Line, s)
			}
			v = []any{res, attr}
		}
	}
	return obj{"Fn::" + name: v}, nil
}

// isIntrinsicTag: a local tag (!X), not one of YAML's own (!!str, !!map).
func isIntrinsicTag(tag string) bool {
	return strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!")
}

// ---------------------------------------------------------------------------
// Small accessors that fail the test with the path they were looking for.

func get(t *testing.T, v any, path ...string) any {
	t.Helper()
	cur := v
	for i, p := range path {
		m, ok := cur.(obj)
		require.True(t, ok, "%s is not a mapping", strings.Join(path[:i], "."))
		cur, ok = m[p]
		require.True(t, ok, "%s is missing", strings.Join(path[:i+1], "."))
	}
	return cur
}

func has(v any, path ...string) bool {
	cur := v
	for _, p := range path {
		m, ok := cur.(obj)
		if !ok {
			return false
		}
		if cur, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

func resource(t *testing.T, tpl obj, id, typ string) obj {
	t.Helper()
	r, ok := get(t, tpl, "Resources", id).(obj)
	require.True(t, ok, "resource %s is a mapping", id)
	require.Equal(t, typ, r["Type"], "resource %s's type", id)
	return r
}

func props(t *testing.T, tpl obj, id, typ string) obj {
	t.Helper()
	p, ok := resource(t, tpl, id, typ)["Properties"].(obj)
	require.True(t, ok, "%s.Properties", id)
	return p
}

func num(t *testing.T, v any, what string) int {
	t.Helper()
	switch n := v.(type) {
	case int:
		return n
	case string:
		i, err := strconv.Atoi(n)
		require.NoError(t, err, "%s: %q is not a number", what, n)
		return i
	}
	t.Fatalf("%s: %#v is not a number", what, v)
	return 0
}

func ref(name string) obj { return obj{"Ref": name} }

func getAtt(res, attr string) obj { return obj{"Fn::GetAtt": []any{res, attr}} }

// ---------------------------------------------------------------------------
// The function

func TestFunction(t *testing.T) {
	tpl := loadTemplate(t)
	assert.Equal(t, "AWS::Serverless-2016-10-31", tpl["Transform"])

	fn := props(t, tpl, functionID, "AWS::Serverless::Function")
	assert.Equal(t, "provided.al2023", fn["Runtime"])
	assert.Equal(t, "bootstrap", fn["Handler"], "the binary the zip holds")
	assert.Equal(t, []any{"arm64"}, fn["Architectures"])
	assert.Equal(t, "dist/runner-reaper-lambda.zip", fn["CodeUri"], "the zip `make package` builds")
	assert.Equal(t, 1, num(t, fn["ReservedConcurrentExecutions"], "ReservedConcurrentExecutions"),
		"one sweep at a time")
	// The README's formula (memlimit.Default) for 50,000 runner pods and
	// their registrations, the peak at most 80% of it: Lambda's MB are
	// MiB.
	fifty := memlimit.Fleet{Pods: 50_000, Registrations: 50_000}
	assert.GreaterOrEqual(t, int64(num(t, fn["MemorySize"], "MemorySize")), memlimit.Default().NeededMiB(fifty),
		"MemorySize fits 50,000 pods by the formula")
	assert.Equal(t, "JSON", get(t, fn, "LoggingConfig", "LogFormat"))

	timeout := time.Duration(num(t, fn["Timeout"], "Timeout")) * time.Second
	assert.Positive(t, timeout)
	assert.Less(t, timeout, scheduleInterval(t, tpl), "a sweep ends before the next one is due")
	assert.Less(t, timeout, 60*time.Second)

	// The scheduler invokes asynchronously: Lambda's own retries and event
	// age apply too, and must not stack sweeps behind a running one.
	assert.Equal(t, 0, num(t, get(t, fn, "EventInvokeConfig", "MaximumRetryAttempts"), "EventInvokeConfig.MaximumRetryAttempts"))
	assert.LessOrEqual(t, num(t, get(t, fn, "EventInvokeConfig", "MaximumEventAgeInSeconds"), "EventInvokeConfig.MaximumEventAgeInSeconds"), 60)

	assert.Equal(t, getAtt(roleID, "Arn"), fn["Role"], "the function runs as the template's own role")
	assert.NotContains(t, fn, "Policies", "with its own role, SAM would ignore Policies: permissions are the role's")
}

func scheduleEvent(t *testing.T, tpl obj) obj {
	t.Helper()
	fn := props(t, tpl, functionID, "AWS::Serverless::Function")
	events, ok := fn["Events"].(obj)
	require.True(t, ok, "the function has Events")
	require.Len(t, events, 1, "one trigger: the schedule")
	for _, e := range events {
		ev, ok := e.(obj)
		require.True(t, ok)
		require.Equal(t, "ScheduleV2", ev["Type"], "an EventBridge Scheduler schedule")
		p, ok := ev["Properties"].(obj)
		require.True(t, ok)
		return p
	}
	return nil
}

var rateRe = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours)\)$`)

func scheduleInterval(t *testing.T, tpl obj) time.Duration {
	t.Helper()
	expr, _ := scheduleEvent(t, tpl)["ScheduleExpression"].(string)
	m := rateRe.FindStringSubmatch(expr)
	require.NotNil(t, m, "ScheduleExpression %q is a rate()", expr)
	n, _ := strconv.Atoi(m[1])
	unit := time.Minute
	if strings.HasPrefix(m[2], "hour") {
		unit = time.Hour
	}
	return time.Duration(n) * unit
}

func TestSchedule(t *testing.T) {
	tpl := loadTemplate(t)
	ev := scheduleEvent(t, tpl)
	assert.Equal(t, "rate(1 minute)", ev["ScheduleExpression"], "every minute")
	assert.Equal(t, time.Minute, scheduleInterval(t, tpl))
	assert.Equal(t, 0, num(t, get(t, ev, "RetryPolicy", "MaximumRetryAttempts"), "RetryPolicy.MaximumRetryAttempts"),
		"a failed sweep is not retried: the next one comes")
	age := num(t, get(t, ev, "RetryPolicy", "MaximumEventAgeInSeconds"), "RetryPolicy.MaximumEventAgeInSeconds")
	assert.LessOrEqual(t, age, 60, "a late sweep is dropped, not stacked")
	assert.GreaterOrEqual(t, age, 60, "EventBridge Scheduler's minimum")
	if s, ok := ev["State"]; ok {
		assert.Equal(t, "ENABLED", s)
	}
	if has(ev, "FlexibleTimeWindow", "Mode") {
		assert.Equal(t, "OFF", get(t, ev, "FlexibleTimeWindow", "Mode"))
	}
}

// ---------------------------------------------------------------------------
// Permissions

// statement is one IAM statement and the condition it depends on, if it
// is one branch of an Fn::If.
type statement struct {
	obj
	where string
	cond  string
}

// statements finds every IAM policy statement in the template: inline role
// policies, AWS::IAM::Policy resources and a function's inline Policies.
func statements(t *testing.T, tpl obj) []statement {
	t.Helper()
	var out []statement
	addDoc := func(where string, doc any) {
		for _, s := range asList(get(t, doc, "Statement")) {
			cond := ""
			if f, ok := s.(obj)["Fn::If"]; ok {
				args := f.([]any)
				require.Len(t, args, 3, "%s: Fn::If has three arguments", where)
				cond = args[0].(string)
				require.Equal(t, ref("AWS::NoValue"), args[2], "%s: a conditional statement is present or absent", where)
				s = args[1]
			}
			st, ok := s.(obj)
			require.True(t, ok, "%s: a statement is a mapping: %#v", where, s)
			out = append(out, statement{st, where, cond})
		}
	}
	for id, r := range get(t, tpl, "Resources").(obj) {
		r := r.(obj)
		p, _ := r["Properties"].(obj)
		switch r["Type"] {
		case "AWS::IAM::Role":
			for _, pol := range asList(p["Policies"]) {
				addDoc(id+" policy "+fmt.Sprint(pol.(obj)["PolicyName"]), get(t, pol, "PolicyDocument"))
			}
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			addDoc(id, get(t, p, "PolicyDocument"))
		case "AWS::Serverless::Function":
			for _, pol := range asList(p["Policies"]) {
				if has(pol, "Statement") {
					addDoc(id+" Policies", pol)
				}
			}
		}
	}
	return out
}

func asList(v any) []any {
	switch l := v.(type) {
	case nil:
		return nil
	case []any:
		return l
	}
	return []any{v}
}

func actions(s statement) []string {
	var out []string
	for _, a := range asList(s.obj["Action"]) {
		out = append(out, fmt.Sprint(a))
	}
	sort.Strings(out)
	return out
}

func TestLeastPrivilege(t *testing.T) {
	tpl := loadTemplate(t)
	sts := statements(t, tpl)
	require.NotEmpty(t, sts)

	// Nothing on "*", no wildcard action, no NotAction or NotResource,
	// only Allow; and only the actions a sweep takes.
	allowed := map[string]bool{
		"logs:CreateLogStream":          true,
		"logs:PutLogEvents":             true,
		"eks:DescribeCluster":           true,
		"secretsmanager:GetSecretValue": true,
		"kms:Decrypt":                   true,
		"dynamodb:GetItem":              true,
		"dynamodb:PutItem":              true,
		"dynamodb:UpdateItem":           true,
		"dynamodb:DeleteItem":           true,
	}
	byAction := map[string][]statement{}
	for _, s := range sts {
		assert.Equal(t, "Allow", s.obj["Effect"], "%s", s.where)
		assert.NotContains(t, s.obj, "NotAction", s.where)
		assert.NotContains(t, s.obj, "NotResource", s.where)
		require.Contains(t, s.obj, "Resource", "%s: a statement names its resource", s.where)
		for _, r := range asList(s.obj["Resource"]) {
			if str, ok := r.(string); ok {
				assert.NotEqual(t, "*", str, "%s: a statement on every resource", s.where)
				assert.NotContains(t, str, ":*:", "%s: a wildcard inside a resource ARN", s.where)
			}
		}
		for _, a := range actions(s) {
			assert.NotContains(t, a, "*", "%s: a wildcard action", s.where)
			assert.True(t, allowed[a], "%s: action %s is not one the sweep needs", s.where, a)
			byAction[a] = append(byAction[a], s)
		}
	}

	one := func(action string) statement {
		t.Helper()
		require.Len(t, byAction[action], 1, "one statement grants %s", action)
		return byAction[action][0]
	}
	describe := one("eks:DescribeCluster")
	assert.Equal(t, []string{"eks:DescribeCluster"}, actions(describe))
	assert.Equal(t, obj{"Fn::Sub": clusterArnFn}, describe.obj["Resource"], "DescribeCluster on the one cluster only")
	assert.Empty(t, describe.cond)

	secret := one("secretsmanager:GetSecretValue")
	assert.Equal(t, []string{"secretsmanager:GetSecretValue"}, actions(secret))
	assert.Equal(t, ref("GitHubSecretArn"), secret.obj["Resource"], "GetSecretValue on the one secret only")
	assert.Empty(t, secret.cond)

	key := one("kms:Decrypt")
	assert.Equal(t, ref("GitHubSecretKmsKeyArn"), key.obj["Resource"])
	assert.Equal(t, "HasSecretKmsKey", key.cond, "kms:Decrypt only when a customer key is given")
	assert.Equal(t, obj{"Fn::Sub": "secretsmanager.${AWS::Region}.amazonaws.com"},
		get(t, key.obj, "Condition", "StringEquals", "kms:ViaService"), "and only through Secrets Manager")

	ledger := one("dynamodb:GetItem")
	assert.Equal(t, []string{"dynamodb:GetItem", "dynamodb:PutItem"}, actions(ledger),
		"the table's item actions: read the ledger, write it with a condition")
	assert.Equal(t, getAtt(tableID, "Arn"), ledger.obj["Resource"], "on the one table, not its indexes or others")
	assert.Equal(t, "UseDynamoDB", ledger.cond, "only when the table exists")

	logs := one("logs:PutLogEvents")
	assert.Equal(t, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, actions(logs))
	assert.Equal(t, getAtt("ReaperLogGroup", "Arn"), logs.obj["Resource"], "its own log group")
	resource(t, tpl, "ReaperLogGroup", "AWS::Logs::LogGroup")
	assert.Equal(t, ref("ReaperLogGroup"), get(t, tpl, "Resources", functionID, "Properties", "LoggingConfig", "LogGroup"),
		"the function logs where its role may write")

	// The role: assumed by Lambda only, and nothing attached beyond its
	// inline policy (AWSLambdaBasicExecutionRole would grant logs on "*").
	role := props(t, tpl, roleID, "AWS::IAM::Role")
	assert.NotContains(t, role, "ManagedPolicyArns")
	assert.NotContains(t, role, "PermissionsBoundary")
	trust := asList(get(t, role, "AssumeRolePolicyDocument", "Statement"))
	require.Len(t, trust, 1)
	assert.Equal(t, obj{"Service": "lambda.amazonaws.com"}, get(t, trust[0], "Principal"))
	assert.Equal(t, "sts:AssumeRole", get(t, trust[0], "Action"))
	for id, r := range get(t, tpl, "Resources").(obj) {
		if r.(obj)["Type"] == "AWS::IAM::Role" {
			assert.Equal(t, roleID, id, "one IAM role in the template")
		}
	}
}

// ---------------------------------------------------------------------------
// The ledger table

func TestLedgerTable(t *testing.T) {
	tpl := loadTemplate(t)
	table := resource(t, tpl, tableID, "AWS::DynamoDB::Table")
	assert.Equal(t, "UseDynamoDB", table["Condition"], "the table exists only for the dynamodb ledger")
	assert.Equal(t, obj{"Fn::Equals": []any{ref("LedgerKind"), "dynamodb"}}, get(t, tpl, "Conditions", "UseDynamoDB"))
	kind := get(t, tpl, "Parameters", "LedgerKind").(obj)
	assert.Equal(t, "dynamodb", kind["Default"])
	assert.ElementsMatch(t, []any{"dynamodb", "configmap"}, kind["AllowedValues"])

	p := table["Properties"].(obj)
	assert.Equal(t, "PAY_PER_REQUEST", p["BillingMode"], "on-demand")
	assert.NotContains(t, p, "ProvisionedThroughput")
	assert.Equal(t, []any{obj{"AttributeName": "pk", "KeyType": "HASH"}}, p["KeySchema"])
	assert.Equal(t, []any{obj{"AttributeName": "pk", "AttributeType": "S"}}, p["AttributeDefinitions"])
	assert.NotContains(t, p, "GlobalSecondaryIndexes")
	assert.NotContains(t, p, "LocalSecondaryIndexes")

	// With the configmap ledger, nothing left in the template refers to the
	// table that is not created (the evaluator fails on such a reference).
	params := sampleParams(t, tpl)
	params["LedgerKind"] = "configmap"
	ev := newEvaluator(t, tpl, params)
	require.True(t, ev.absent[tableID], "no table with the configmap ledger")
	for _, section := range []string{"Resources", "Outputs"} {
		for id, v := range get(t, tpl, section).(obj) {
			if c, ok := v.(obj)["Condition"].(string); ok && !ev.condition(c) {
				continue
			}
			ev.where = section + " " + id
			ev.resolve(v)
		}
	}
}

// ---------------------------------------------------------------------------
// Cluster access

func TestAccessEntry(t *testing.T) {
	tpl := loadTemplate(t)
	ae := props(t, tpl, accessID, "AWS::EKS::AccessEntry")
	assert.Equal(t, ref("ClusterName"), ae["ClusterName"])
	assert.Equal(t, getAtt(roleID, "Arn"), ae["PrincipalArn"], "the function's role")
	assert.Equal(t, getAtt(roleID, "Arn"), get(t, tpl, "Resources", functionID, "Properties", "Role"), "is the role the function runs as")
	assert.Equal(t, []any{ref("KubernetesGroup")}, ae["KubernetesGroups"])
	assert.Equal(t, "STANDARD", ae["Type"])
	assert.NotContains(t, ae, "AccessPolicies", "no EKS access policy: the rights are the namespaced Role's, through the group")
	assert.Equal(t, lambdaGroup, get(t, tpl, "Parameters", "KubernetesGroup", "Default"),
		"the default group is the one components/lambda-access binds")
}

// ---------------------------------------------------------------------------
// Parameters and the function's environment

func TestEveryParameterUsed(t *testing.T) {
	tpl := loadTemplate(t)
	used := map[string]bool{}
	subRef := regexp.MustCompile(`\$\{([A-Za-z0-9:]+)(\.[A-Za-z0-9]+)?\}`)
	for _, section := range []string{"Conditions", "Resources", "Outputs"} {
		walk(tpl[section], func(m obj) {
			if r, ok := m["Ref"].(string); ok {
				used[r] = true
			}
			sub := m["Fn::Sub"]
			if l, ok := sub.([]any); ok && len(l) > 0 {
				sub = l[0]
			}
			if s, ok := sub.(string); ok {
				for _, g := range subRef.FindAllStringSubmatch(s, -1) {
					used[g[1]] = true
				}
			}
		})
	}
	params := get(t, tpl, "Parameters").(obj)
	for name := range params {
		assert.True(t, used[name], "parameter %s is used nowhere", name)
	}

	var required []string
	for name, p := range params {
		if _, ok := p.(obj)["Default"]; !ok {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	assert.Equal(t, []string{"ClusterName", "GitHubSecretArn", "Scopes"}, required,
		"a user must set only what has no safe default")
	assert.Equal(t, "true", get(t, params, "DryRun", "Default"), "a new deployment starts in dry-run")
	for _, name := range []string{"GitHubAppId", "GitHubInstallationId"} {
		assert.Equal(t, "", get(t, params, name, "Default"))
	}
	for _, name := range []string{"Scopes", "Namespaces", "ConfirmAfter", "MaxActions", "MaxFraction", "KubernetesGroup", "LedgerKind"} {
		assert.Contains(t, params, name)
	}
}

// The environment the template gives the function is one the reaper's own
// configuration accepts, for each ledger and each kind of GitHub auth; an
// unknown REAPER_ name, a bad default or a missing variable fails here.
func TestEnvironmentIsAValidConfiguration(t *testing.T) {
	tpl := loadTemplate(t)
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   map[string]string
		absent []string
	}{
		{
			name:   "token and dynamodb",
			params: map[string]string{},
			want: map[string]string{
				"REAPER_LEDGER":          "dynamodb:" + tableRef,
				"REAPER_DRY_RUN":         "true",
				"REAPER_EKS_CLUSTER":     "build-fleet",
				"REAPER_READ_RUNNER_LOG": "true",
			},
			absent: []string{"REAPER_GITHUB_APP_ID", "REAPER_GITHUB_INSTALLATION_ID", "REAPER_SCOPE_LABEL", "REAPER_OWNER_STAMP_LABEL",
				"REAPER_GHOST_NAME_PREFIX", "REAPER_GHOST_LABEL"},
		},
		{
			name: "app and configmap, everything set",
			params: map[string]string{
				"LedgerKind": "configmap", "GitHubAppId": "123456", "GitHubInstallationId": "7890123",
				"DryRun": "false", "MaxActions": "3", "MaxFraction": "0.1", "ConfirmAfter": "2m",
				"ScopeLabel": "runners.example.com/scope", "OwnerStampLabel": "pool.example.com/claimed-by",
				"GhostNamePrefix": "arc-runners-", "GhostLabel": "reaper-owned", "ArcLeaks": "true", "ArcRemoveFinalizers": "true",
				"DeleteServiceAccount": "true", "LogLevel": "debug", "Namespaces": "arc-runners,arc-gpu", "ReadRunnerLog": "false",
			},
			want: map[string]string{
				"REAPER_LEDGER":                 "configmap:arc-runners/runner-reaper-ledger",
				"REAPER_GITHUB_APP_ID":          "123456",
				"REAPER_GITHUB_INSTALLATION_ID": "7890123",
				"REAPER_DRY_RUN":                "false",
				"REAPER_MAX_ACTIONS":            "3",
				"REAPER_MAX_FRACTION":           "0.1",
				"REAPER_CONFIRM_AFTER":          "2m",
				"REAPER_GHOST_LABEL":            "reaper-owned",
				"REAPER_READ_RUNNER_LOG":        "false",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := sampleParams(t, tpl)
			for k, v := range tc.params {
				require.Contains(t, get(t, tpl, "Parameters").(obj), k)
				params[k] = v
			}
			env := functionEnv(t, tpl, params)
			assert.Equal(t, "build-fleet", env["REAPER_EKS_CLUSTER"])
			assert.Equal(t, params["GitHubSecretArn"], env["REAPER_GITHUB_SECRET_ARN"])
			assert.Equal(t, "RunnerReaper", env["REAPER_METRICS_NAMESPACE"])
			for k, v := range tc.want {
				assert.Equal(t, v, env[k], k)
			}
			for _, k := range tc.absent {
				assert.NotContains(t, env, k)
			}

			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix+"_") {
					t.Setenv(k, "")
					require.NoError(t, os.Unsetenv(k))
				}
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			_, err := config.Load(false, "")
			require.NoError(t, err, "the template's environment %v", env)
		})
	}
}

// tableRef is what !Ref LedgerTable stands for in the evaluation: a table
// name as CloudFormation makes them.
const tableRef = "runner-reaper-LedgerTable-1A2B3C4D5E6F"

// sampleParams are the parameters' defaults and a value for each required
// one.
func sampleParams(t *testing.T, tpl obj) map[string]string {
	t.Helper()
	out := map[string]string{
		"ClusterName":     "build-fleet",
		"GitHubSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:runner-reaper-github-AbCdEf",
		"Scopes":          "org:acme",
	}
	for name, p := range get(t, tpl, "Parameters").(obj) {
		p := p.(obj)
		d, ok := p["Default"]
		if !ok {
			require.Contains(t, out, name, "a value for the required parameter %s", name)
			continue
		}
		out[name] = fmt.Sprint(d)
		if pat, ok := p["AllowedPattern"].(string); ok {
			assert.Regexp(t, pat, out[name], "%s's default against its AllowedPattern", name)
		}
		if av, ok := p["AllowedValues"].([]any); ok {
			assert.Contains(t, fmt.Sprint(av), fmt.Sprint(d), "%s's default among its AllowedValues", name)
		}
	}
	for name, p := range get(t, tpl, "Parameters").(obj) {
		if pat, ok := p.(obj)["AllowedPattern"].(string); ok {
			assert.Regexp(t, pat, out[name], "%s's sample against its AllowedPattern", name)
		}
	}
	return out
}

func functionEnv(t *testing.T, tpl obj, params map[string]string) map[string]string {
	t.Helper()
	ev := newEvaluator(t, tpl, params)
	vars := get(t, tpl, "Resources", functionID, "Properties", "Environment", "Variables").(obj)
	env := map[string]string{}
	for k, v := range vars {
		r := ev.resolve(v)
		if r == nil {
			continue // AWS::NoValue
		}
		s, ok := r.(string)
		require.True(t, ok, "%s resolves to a string: %#v", k, r)
		env[k] = s
	}
	return env
}

// ---------------------------------------------------------------------------
// A small evaluator of the intrinsic functions the template uses, enough to
// see what the function's environment and the configmap variant become.

type evaluator struct {
	t      *testing.T
	tpl    obj
	params map[string]string
	// absent are the resources whose Condition is false: a reference to
	// one is an error (reported with where).
	absent map[string]bool
	where  string
}

func newEvaluator(t *testing.T, tpl obj, params map[string]string) *evaluator {
	e := &evaluator{t: t, tpl: tpl, params: params, absent: map[string]bool{}}
	for id, r := range get(t, tpl, "Resources").(obj) {
		if c, ok := r.(obj)["Condition"].(string); ok && !e.condition(c) {
			e.absent[id] = true
		}
	}
	return e
}

func (e *evaluator) use(resource string) {
	if e.absent[resource] {
		e.t.Errorf("%s refers to %s, which these parameters do not create", e.where, resource)
	}
}

var pseudo = map[string]string{
	"AWS::Region":    "eu-west-1",
	"AWS::AccountId": "123456789012",
	"AWS::Partition": "aws",
	"AWS::StackName": "runner-reaper",
}

func (e *evaluator) refValue(name string) any {
	if v, ok := e.params[name]; ok {
		return v
	}
	if v, ok := pseudo[name]; ok {
		return v
	}
	if name == "AWS::NoValue" {
		return nil
	}
	e.use(name)
	if name == tableID {
		return tableRef
	}
	// Any other resource: leave the reference, a test may look for it.
	require.Contains(e.t, get(e.t, e.tpl, "Resources").(obj), name, "!Ref %s names a parameter or resource", name)
	return ref(name)
}

func (e *evaluator) condition(name string) bool {
	return e.truth(get(e.t, e.tpl, "Conditions", name))
}

func (e *evaluator) truth(v any) bool {
	m, ok := v.(obj)
	require.True(e.t, ok, "a condition: %#v", v)
	require.Len(e.t, m, 1)
	for fn, arg := range m {
		args := asList(arg)
		switch fn {
		case "Condition":
			return e.condition(arg.(string))
		case "Fn::Equals":
			require.Len(e.t, args, 2)
			return fmt.Sprint(e.resolve(args[0])) == fmt.Sprint(e.resolve(args[1]))
		case "Fn::Not":
			require.Len(e.t, args, 1)
			return !e.truth(args[0])
		case "Fn::And", "Fn::Or":
			all, any := true, false
			for _, a := range args {
				b := e.truth(a)
				all, any = all && b, any || b
			}
			if fn == "Fn::And" {
				return all
			}
			return any
		}
		e.t.Fatalf("unknown condition function %s", fn)
	}
	return false
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// resolve evaluates Ref (to parameters and pseudo parameters), Fn::If,
// Fn::Sub and the conditions; it leaves Fn::GetAtt and references to
// resources as they are. AWS::NoValue is nil, and drops a map entry or a
// list item.
func (e *evaluator) resolve(v any) any {
	switch x := v.(type) {
	case []any:
		out := []any{}
		for _, i := range x {
			if r := e.resolve(i); r != nil {
				out = append(out, r)
			}
		}
		return out
	case obj:
		if len(x) == 1 {
			for fn, arg := range x {
				switch fn {
				case "Ref":
					return e.refValue(arg.(string))
				case "Fn::GetAtt":
					e.use(fmt.Sprint(asList(arg)[0]))
					return x
				case "Fn::If":
					args := arg.([]any)
					require.Len(e.t, args, 3)
					if e.condition(args[0].(string)) {
						return e.resolve(args[1])
					}
					return e.resolve(args[2])
				case "Fn::Sub":
					s, ok := arg.(string)
					require.True(e.t, ok, "Fn::Sub with a variable map is not used")
					return subVar.ReplaceAllStringFunc(s, func(m string) string {
						name := m[2 : len(m)-1]
						if res, _, ok := strings.Cut(name, "."); ok {
							e.use(res)
							return m // ${Resource.Attr}
						}
						r := e.refValue(name)
						if s, ok := r.(string); ok {
							return s
						}
						return m
					})
				}
			}
		}
		out := obj{}
		for k, i := range x {
			if r := e.resolve(i); r != nil {
				out[k] = r
			}
		}
		return out
	}
	return v
}

// walk calls f on every mapping inside v.
func walk(v any, f func(obj)) {
	switch x := v.(type) {
	case obj:
		f(x)
		for _, i := range x {
			walk(i, f)
		}
	case []any:
		for _, i := range x {
			walk(i, f)
		}
	}
}

// ---------------------------------------------------------------------------
// The Kubernetes side: components/lambda-access

// renderWithLambdaAccess renders the CronJob base with the component,
// optionally moving everything to namespace.
func renderWithLambdaAccess(t *testing.T, namespace string) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	return testenv.Kustomize(t, testenv.Kustomization{
		Base:       filepath.Join(root, "k8s-cronjob"),
		Components: []string{filepath.Join("components", "lambda-access")},
		Namespace:  namespace,
	})
}

type rendered struct {
	roles    map[string]string // name -> namespace
	bindings map[string]rbacv1.RoleBinding
}

func parseRendered(t *testing.T, out []byte) rendered {
	t.Helper()
	r := rendered{roles: map[string]string{}, bindings: map[string]rbacv1.RoleBinding{}}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := rd.Read()
		if err != nil {
			break
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		require.NoError(t, sigsyaml.Unmarshal(doc, &meta))
		switch meta.Kind {
		case "Role":
			r.roles[meta.Metadata.Name] = meta.Metadata.Namespace
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &rb))
			r.bindings[rb.Name] = rb
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("the Lambda's access must stay namespaced: %s %s", meta.Kind, meta.Metadata.Name)
		}
	}
	return r
}

func TestLambdaAccessComponent(t *testing.T) {
	tpl := loadTemplate(t)
	group := get(t, tpl, "Parameters", "KubernetesGroup", "Default")

	for _, ns := range []string{"", "platform-runners"} {
		t.Run("namespace="+ns, func(t *testing.T) {
			want := ns
			if want == "" {
				want = runnersNS
			}
			r := parseRendered(t, renderWithLambdaAccess(t, ns))
			require.Contains(t, r.bindings, bindingName)
			rb := r.bindings[bindingName]
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: cronjobRole}, rb.RoleRef,
				"the same Role as the CronJob")
			assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: lambdaGroup}}, rb.Subjects,
				"the group the access entry maps the function's role to, and no one else")
			assert.Equal(t, lambdaGroup, group, "the template's default KubernetesGroup is the bound group")
			assert.Equal(t, want, rb.Namespace)
			require.Contains(t, r.roles, cronjobRole)
			assert.Equal(t, rb.Namespace, r.roles[cronjobRole], "the binding is beside the Role it grants")

			cron := r.bindings[cronjobRole]
			require.Len(t, cron.Subjects, 1, "the CronJob's binding is unchanged")
			assert.Equal(t, rbacv1.ServiceAccountKind, cron.Subjects[0].Kind)

			// The runner-log right, in a Role of its own, is the
			// Lambda's too.
			require.Contains(t, r.bindings, runnerLogRBAC)
			logRB := r.bindings[runnerLogRBAC]
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: runnerLogRBAC}, logRB.RoleRef)
			assert.Equal(t, []rbacv1.Subject{cron.Subjects[0], {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: lambdaGroup}}, logRB.Subjects,
				"the CronJob's ServiceAccount and the Lambda's group")
			assert.Equal(t, want, logRB.Namespace)
			assert.Len(t, r.bindings, 3)
		})
	}

	// With the read turned off, in either order, the runner-log Role and
	// its binding are gone for both, and the Lambda keeps the rest.
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	for _, order := range [][]string{{"lambda-access", "runner-log-off"}, {"runner-log-off", "lambda-access"}} {
		k := testenv.Kustomization{Base: filepath.Join(root, "k8s-cronjob")}
		for _, c := range order {
			k.Components = append(k.Components, filepath.Join("components", c))
		}
		out := testenv.Kustomize(t, k)
		r := parseRendered(t, out)
		assert.NotContains(t, r.roles, runnerLogRBAC)
		assert.NotContains(t, r.bindings, runnerLogRBAC)
		assert.Contains(t, r.bindings, bindingName)
		assert.Len(t, r.bindings, 2)
	}
}
