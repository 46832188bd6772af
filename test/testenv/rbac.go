package testenv

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Grant creates, as the administrator, a Role named role in ns holding the
// rules and a RoleBinding of the same name granting it to user: with
// AddUser, that user may then do exactly what the rules allow, and only in
// ns.
func (e *Env) Grant(t testing.TB, ns, role, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      rules,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role %s/%s: %v", ns, role, err)
	}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rolebinding %s/%s: %v", ns, role, err)
	}
}

// LedgerConfigMap is the name of the sweep's default ConfigMap ledger.
const LedgerConfigMap = "runner-reaper-ledger"

// LeastPrivilege is every permission a sweep with the default options needs
// in its namespace, and nothing more: no ServiceAccount deletes, no cluster
// scope. One verb and one resource per rule, so that a test can take any one
// away. The sweep's own tests grant exactly this, and the shipped Role must
// be exactly this: one list, so the two cannot drift apart.
func LeastPrivilege() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{LedgerConfigMap}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update"}, ResourceNames: []string{LedgerConfigMap}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		// REAPER_READ_RUNNER_LOG, on by default: the kustomize base's
		// components/runner-log, which grants it in a Role of its own.
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
	}
}

// Without is rules less every rule that grants exactly one of perms (as
// Permission names them, e.g. "delete pods"), so that a test takes a right
// away by its name, not by its place in the list.
func Without(rules []rbacv1.PolicyRule, perms ...string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		p := Permission(r)
		if len(p) == 1 && slices.Contains(perms, p[0]) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Permission names each permission one rule grants: "verb resource[.group]
// [names]", e.g. "get configmaps runner-reaper-ledger".
func Permission(r rbacv1.PolicyRule) []string {
	var out []string
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				s := v + " " + res
				if g != "" {
					s += "." + g
				}
				if len(r.ResourceNames) > 0 {
					s += " " + strings.Join(r.ResourceNames, ",")
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// Permissions is every permission the rules grant, sorted, so that two Roles
// compare as sets.
func Permissions(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, Permission(r)...)
	}
	sort.Strings(out)
	return out
}
