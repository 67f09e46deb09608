package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	giev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// object is one rendered manifest decoded into its real API type.
type object struct {
	kind, name string
	obj        any
}

// newTyped returns a pointer to the Go type of apiVersion/kind, or nil when
// the kustomization is not expected to produce that kind.
func newTyped(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "monitoring.coreos.com/v1 PodMonitor":
		return &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	case "inference.networking.k8s.io/v1 InferencePool":
		return &giev1.InferencePool{}
	}
	return nil
}

// render runs kustomize (the library kubectl and the kustomize CLI use) on
// dir and decodes every object strictly: a field its type lacks, a
// duplicate key or a kind with no type is an error.
func render(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []object
	for _, r := range rm.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeStrict(data)
		if err != nil {
			t.Fatalf("%s: %s/%s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		out = append(out, o)
	}
	return out
}

func decodeStrict(data []byte) (object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return object{}, err
	}
	typed := newTyped(tm.APIVersion, tm.Kind)
	if typed == nil {
		return object{}, fmt.Errorf("no Go type for %s %s", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(data, typed); err != nil {
		return object{}, err
	}
	name := typed.(metav1.Object).GetName()
	return object{kind: tm.APIVersion + " " + tm.Kind, name: name, obj: typed}, nil
}

func list(objs []object) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.kind+" "+o.name)
	}
	sort.Strings(s)
	return strings.Join(s, "\n")
}

func find[T any](t *testing.T, objs []object, name string) *T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.obj.(*T); ok && o.name == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %q in:\n%s", zero, name, list(objs))
	return nil
}

func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	for _, bad := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec: {podMetricsEndpoints: [{port: m, honorLabel: true}]}\n",
		"apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: x}\nspec: {targetPort: [{number: 8000}]}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
	} {
		if _, err := decodeStrict([]byte(bad)); err == nil {
			t.Errorf("decoded without error:\n%s", bad)
		}
	}
}

func TestBase(t *testing.T) {
	objs := render(t, "kubernetes/base")
	t.Logf("kubernetes/base renders %d objects:\n%s", len(objs), list(objs))
	want := strings.Join([]string{
		"apps/v1 Deployment picometer",
		"monitoring.coreos.com/v1 PodMonitor picometer-sidecar",
		"monitoring.coreos.com/v1 PrometheusRule picometer-rules",
		"v1 ConfigMap picometer-dashboards",
		"v1 Service picometer",
	}, "\n")
	if got := list(objs); got != want {
		t.Fatalf("objects:\n%s\nwant:\n%s", got, want)
	}
	checkPodMonitor(t, objs, checkPod(t, objs, "ghcr.io/picometer/picometer:0.1.0"))
	// `make image` names the archive's image as the base's Deployment does,
	// so a loaded image is the one the manifests run.
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^IMAGE\s*\?=\s*(\S+)$`).FindSubmatch(mk); m == nil || string(m[1]) != "ghcr.io/picometer/picometer:0.1.0" {
		t.Errorf("Makefile IMAGE default %q, want the base's image ghcr.io/picometer/picometer:0.1.0", m)
	}

	cm := find[corev1.ConfigMap](t, objs, "picometer-dashboards")
	if cm.Labels[GrafanaDashboardLabel] != "1" {
		t.Errorf("dashboards ConfigMap labels %v lack %s: \"1\"", cm.Labels, GrafanaDashboardLabel)
	}
	jsons, _ := filepath.Glob("../dashboards/*.json")
	for _, p := range jsons {
		data, _ := os.ReadFile(p)
		if cm.Data[filepath.Base(p)] != string(data) {
			t.Errorf("dashboards ConfigMap: %s differs from %s", filepath.Base(p), p)
		}
	}
	pr := find[monitoringv1.PrometheusRule](t, objs, "picometer-rules")
	alerts := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts++
				if r.For == nil || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
					t.Errorf("alert %s lacks for, severity or summary", r.Alert)
				}
			}
		}
	}
	if alerts == 0 {
		t.Error("PrometheusRule has no alerts")
	}
}

func TestExampleOverlay(t *testing.T) {
	objs := render(t, "kubernetes/overlays/example")
	t.Logf("kubernetes/overlays/example renders %d objects:\n%s", len(objs), list(objs))
	var names []string
	for _, o := range objs {
		names = append(names, o.kind+" "+o.name)
		want := "llm"
		if strings.HasSuffix(o.kind, " ClusterRole") || strings.HasSuffix(o.kind, " ClusterRoleBinding") {
			want = ""
		}
		if ns := o.obj.(metav1.Object).GetNamespace(); ns != want {
			t.Errorf("%s %s: namespace %q, want %q", o.kind, o.name, ns, want)
		}
		// One path into Prometheus: the sidecar pushes OTLP, so nothing
		// scrapes it too (every series would be ingested twice).
		if strings.HasSuffix(o.kind, " PodMonitor") {
			t.Errorf("PodMonitor %s rendered while the sidecar pushes OTLP: double ingestion", o.name)
		}
	}
	// The base's 5 less the PodMonitor, the InferencePool, its EPP's 8
	// objects (epp.yaml), the Collector's ConfigMap, Deployment and Service.
	if len(objs) != 16 {
		t.Errorf("%d objects, want 16", len(objs))
	}
	d := checkPod(t, objs, "registry.example.com/picometer:0.1.0")

	pool := find[giev1.InferencePool](t, objs, "picometer")
	sel := labels.Set{}
	for k, v := range pool.Spec.Selector.MatchLabels {
		sel[string(k)] = string(v)
	}
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("InferencePool selector %v does not select the pods %v", sel, d.Spec.Template.Labels)
	}
	if len(pool.Spec.TargetPorts) != 1 || int32(pool.Spec.TargetPorts[0].Number) != containerPort(t, d, "picometerd", "http") {
		t.Errorf("InferencePool targetPorts %v, want picometerd's http port", pool.Spec.TargetPorts)
	}

	checkEPP(t, objs, pool)

	var collector *corev1.ConfigMap
	for _, o := range objs {
		if cm, ok := o.obj.(*corev1.ConfigMap); ok && strings.HasPrefix(o.name, "otel-collector-") {
			collector = cm
		}
	}
	if collector == nil {
		t.Fatalf("no otel-collector ConfigMap in %v", names)
	}
	var cfg struct {
		Receivers map[string]any `json:"receivers"`
		Exporters map[string]any `json:"exporters"`
		Service   struct {
			Pipelines map[string]struct {
				Receivers, Processors, Exporters []string
			} `json:"pipelines"`
		} `json:"service"`
		Processors map[string]any `json:"processors"`
	}
	if err := yaml.UnmarshalStrict([]byte(collector.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("collector config: %v", err)
	}
	p, ok := cfg.Service.Pipelines["metrics"]
	if !ok || len(p.Receivers) == 0 || len(p.Exporters) == 0 {
		t.Fatalf("collector config has no metrics pipeline: %+v", cfg.Service)
	}
	for _, r := range p.Receivers {
		if _, ok := cfg.Receivers[r]; !ok {
			t.Errorf("pipeline receiver %q is not defined", r)
		}
	}
	for _, e := range p.Exporters {
		if _, ok := cfg.Exporters[e]; !ok {
			t.Errorf("pipeline exporter %q is not defined", e)
		}
	}
	sidecar := container(t, d, "sidecar")
	var endpoint string
	for _, e := range sidecar.Env {
		if e.Name == "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" {
			endpoint = e.Value
		}
	}
	if !strings.HasPrefix(endpoint, "http://otel-collector:4318/") {
		t.Errorf("sidecar OTLP endpoint %q does not point at the Collector's OTLP/HTTP receiver", endpoint)
	}
	checkCollector(t, objs, collector)
}

func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, name)
	return nil
}

func containerPort(t *testing.T, d *appsv1.Deployment, c, port string) int32 {
	t.Helper()
	for _, p := range container(t, d, c).Ports {
		if p.Name == port {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c, port)
	return 0
}

// checkPod checks the pod the issue asks for: both binaries from image,
// the socket directory shared through an emptyDir, /ready and /health probes, requests
// and limits, non-root with a read-only root filesystem and no privilege
// escalation; and that the Service selects it.
func checkPod(t *testing.T, objs []object, image string) *appsv1.Deployment {
	t.Helper()
	d := find[appsv1.Deployment](t, objs, "picometer")
	spec := d.Spec.Template.Spec
	podSel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !podSel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Fatalf("Deployment selector %v does not match its pods %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	}
	var emptyDir string
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil {
			emptyDir = v.Name
		}
	}
	if emptyDir == "" {
		t.Fatal("no emptyDir volume for the socket")
	}
	var mounts []string
	for _, name := range []string{"picometerd", "sidecar"} {
		c := container(t, d, name)
		if c.Image != image {
			t.Errorf("%s: image %q, want %q", name, c.Image, image)
		}
		// picometerd's readiness is /ready (model loaded, engine stepping),
		// its liveness /health; the sidecar has /health for both.
		ready := map[string]string{"picometerd": "/ready", "sidecar": "/health"}[name]
		for _, p := range []struct {
			kind string
			p    *corev1.Probe
			want string
		}{{"readiness", c.ReadinessProbe, ready}, {"liveness", c.LivenessProbe, "/health"}} {
			if p.p == nil || p.p.HTTPGet == nil || p.p.HTTPGet.Path != p.want {
				t.Errorf("%s: %s probe %+v, want an HTTP GET of %s", name, p.kind, p.p, p.want)
			}
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
			if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
				t.Errorf("%s: %s request %v limit %v: want both, request ≤ limit", name, r, &req, &lim)
			}
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: security context %+v: want allowPrivilegeEscalation false, readOnlyRootFilesystem true", name, sc)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == emptyDir {
				mounts = append(mounts, m.MountPath)
			}
		}
	}
	if len(mounts) != 2 || mounts[0] != mounts[1] {
		t.Errorf("socket emptyDir mounts %v: want both containers at the same path", mounts)
	}
	socketDir := mounts[0]
	for _, arg := range append(container(t, d, "picometerd").Args, container(t, d, "sidecar").Args...) {
		if strings.Contains(arg, "socket=") && !strings.HasPrefix(arg[strings.Index(arg, "=")+1:], socketDir+"/") {
			t.Errorf("%s: socket outside the shared directory %s", arg, socketDir)
		}
	}

	svc := find[corev1.Service](t, objs, "picometer")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the pods", svc.Spec.Selector)
	}
	return d
}

// checkPodMonitor checks that the base's PodMonitor scrapes the sidecar's
// metrics port of d's pods as job picometer-sidecar.
func checkPodMonitor(t *testing.T, objs []object, d *appsv1.Deployment) {
	t.Helper()
	pm := find[monitoringv1.PodMonitor](t, objs, "picometer-sidecar")
	pmSel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil || !pmSel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %v does not select the pods", pm.Spec.Selector)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == nil ||
		*pm.Spec.PodMetricsEndpoints[0].Port != "metrics" {
		t.Fatalf("PodMonitor endpoints %+v: want the sidecar's metrics port", pm.Spec.PodMetricsEndpoints)
	}
	containerPort(t, d, "sidecar", "metrics")
	job := ""
	for _, r := range pm.Spec.PodMetricsEndpoints[0].RelabelConfigs {
		if r.TargetLabel == "job" && r.Replacement != nil {
			job = *r.Replacement
		}
	}
	if job != "picometer-sidecar" {
		t.Errorf("PodMonitor sets job %q, want picometer-sidecar (alerts/ and the dashboards select it)", job)
	}
}

func TestGeneratedUpToDate(t *testing.T) {
	files, err := Files("..")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate", name)
		}
	}
}
