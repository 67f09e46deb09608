package deploy

import (
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	giev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)

// serves fails unless svc selects d's pods and every port of svc reaches
// a container port of d (by number or name).
func serves(t *testing.T, svc *corev1.Service, d *appsv1.Deployment) {
	t.Helper()
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service %s selector %v does not select Deployment %s's pods %v", svc.Name, svc.Spec.Selector, d.Name, d.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) == 0 {
		t.Errorf("Service %s has no ports", svc.Name)
	}
	for _, sp := range svc.Spec.Ports {
		target := sp.TargetPort
		if target == (intstr.IntOrString{}) {
			target = intstr.FromInt32(sp.Port)
		}
		found := false
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, cp := range c.Ports {
				if (target.Type == intstr.Int && cp.ContainerPort == target.IntVal) || (target.Type == intstr.String && cp.Name == target.StrVal) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("Service %s port %d targets %s, no container port of Deployment %s", svc.Name, sp.Port, target.String(), d.Name)
		}
	}
}

// checkEPP: the endpoint picker the InferencePool names is rendered (GIE's
// published Deployment and Service at the pinned version), its Service
// answers on the pool's port, it picks for this pool in this namespace,
// and its service account is bound to its roles in the overlay's
// namespace.
func checkEPP(t *testing.T, objs []object, pool *giev1.InferencePool) {
	t.Helper()
	ref := pool.Spec.EndpointPickerRef
	if ref.Kind != "" && ref.Kind != "Service" {
		t.Fatalf("InferencePool endpointPickerRef kind %q, want Service", ref.Kind)
	}
	svc := find[corev1.Service](t, objs, string(ref.Name))
	d := find[appsv1.Deployment](t, objs, EPPName)
	serves(t, svc, d)
	if ref.Port == nil || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(ref.Port.Number) }) {
		t.Errorf("InferencePool endpointPickerRef port %v is not a port of Service %s %v", ref.Port, svc.Name, svc.Spec.Ports)
	}
	_, version, err := gieModule("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("EPP Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if want := "registry.k8s.io/gateway-api-inference-extension/epp:" + version; c.Image != want {
		t.Errorf("EPP image %s, want %s (deploy/go.mod's GIE version)", c.Image, want)
	}
	arg := func(flag string) string {
		i := slices.Index(c.Args, flag)
		if i < 0 || i+1 >= len(c.Args) {
			t.Errorf("EPP args %q have no %s", c.Args, flag)
			return ""
		}
		return c.Args[i+1]
	}
	if got := arg("--pool-name"); got != pool.Name {
		t.Errorf("EPP --pool-name %q, want the InferencePool %q", got, pool.Name)
	}
	if got := arg("--pool-namespace"); got != "$(POD_NAMESPACE)" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		t.Errorf("EPP --pool-namespace %q, want $(POD_NAMESPACE) from the downward API's metadata.namespace", got)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			find[corev1.ConfigMap](t, objs, v.ConfigMap.Name)
		}
	}
	sa := find[corev1.ServiceAccount](t, objs, d.Spec.Template.Spec.ServiceAccountName)
	rb := find[rbacv1.RoleBinding](t, objs, EPPName+"-pod-read-binding")
	crb := find[rbacv1.ClusterRoleBinding](t, objs, EPPName+"-auth-reviewer-binding")
	find[rbacv1.Role](t, objs, rb.RoleRef.Name)
	find[rbacv1.ClusterRole](t, objs, crb.RoleRef.Name)
	for _, subjects := range [][]rbacv1.Subject{rb.Subjects, crb.Subjects} {
		if len(subjects) != 1 || subjects[0].Name != sa.Name || subjects[0].Namespace != sa.Namespace {
			t.Errorf("binding subjects %+v, want the EPP's service account %s/%s", subjects, sa.Namespace, sa.Name)
		}
	}
}

// checkCollector: the Collector the sidecar pushes to is rendered, its
// Service answers on the sidecar's endpoint, and it runs the generated
// configuration.
func checkCollector(t *testing.T, objs []object, config *corev1.ConfigMap) {
	t.Helper()
	svc := find[corev1.Service](t, objs, "otel-collector")
	d := find[appsv1.Deployment](t, objs, "otel-collector")
	serves(t, svc, d)
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 4318 }) {
		t.Errorf("Collector Service ports %v lack 4318 (the sidecar's OTLP/HTTP endpoint)", svc.Spec.Ports)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Collector Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	var vol string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == config.Name {
			vol = v.Name
		}
	}
	if vol == "" {
		t.Fatalf("Collector Deployment mounts no volume of ConfigMap %s: %+v", config.Name, d.Spec.Template.Spec.Volumes)
	}
	var configPath string
	for _, a := range c.Args {
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			configPath = p
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == vol && configPath == path.Join(m.MountPath, "config.yaml") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("Collector --config=%q is not config.yaml of the mounted ConfigMap %s (%+v)", configPath, config.Name, c.VolumeMounts)
	}
}
