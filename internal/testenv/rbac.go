package testenv

import (
	"context"
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
