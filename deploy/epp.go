package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The endpoint picker (EPP) the example overlay's InferencePool names,
// rendered from the Gateway API Inference Extension's published manifests
// at the version deploy/go.mod pins, never copied by hand.
const (
	EPPFile      = "deploy/kubernetes/overlays/example/epp.yaml"
	GIEModule    = "sigs.k8s.io/gateway-api-inference-extension"
	gieManifests = "config/manifests/inferencepool-resources.yaml"
	// PoolName is the overlay's InferencePool; its EPP is EPPName.
	PoolName = "picometer"
	EPPName  = PoolName + "-epp"
)

// gieModule returns the directory and version of the pinned GIE module
// (go list -m in repo/deploy: the module cache).
func gieModule(repo string) (dir, version string, err error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", GIEModule)
	cmd.Dir = filepath.Join(repo, "deploy")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m %s: %v: %s", GIEModule, err, stderr.String())
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", "", fmt.Errorf("go list -m %s: %q: not downloaded? (cd deploy && go mod download %s)", GIEModule, out, GIEModule)
	}
	return f[0], f[1], nil
}

// EndpointPicker renders GIE's published InferencePool manifests
// (config/manifests/inferencepool-resources.yaml of the pinned module)
// for the overlay's pool. Every object but the InferencePool (the
// overlay's own) is decoded strictly into its Kubernetes type and kept as
// published, the EPP image included, except:
//   - names: the EPP's (its Deployment, Service, ServiceAccount and their
//     app label) becomes EPPName, every other object's is prefixed with
//     EPPName (cluster-scoped RBAC included, so two releases do not
//     collide), and every reference to a name follows it;
//   - the EPP's --pool-name is PoolName and its --pool-namespace the pod's
//     own namespace (POD_NAMESPACE from the downward API), so the
//     overlay's namespace: applies to it.
func EndpointPicker(repo string) ([]byte, error) {
	dir, version, err := gieModule(repo)
	if err != nil {
		return nil, err
	}
	src := filepath.Join(dir, filepath.FromSlash(gieManifests))
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var objs []any
	eppName := ""
	for i, doc := range splitYAML(data) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", src, i, err)
		}
		var obj any
		switch meta.Kind {
		case "InferencePool":
			continue
		case "Service":
			obj = &corev1.Service{}
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Deployment":
			obj = &appsv1.Deployment{}
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			return nil, fmt.Errorf("%s: document %d: kind %q, which this generator does not know", src, i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %s %s: %w", src, meta.Kind, meta.Metadata.Name, err)
		}
		if d, ok := obj.(*appsv1.Deployment); ok {
			if eppName != "" {
				return nil, fmt.Errorf("%s: more than one Deployment", src)
			}
			eppName = d.Name
			if err := eppDeployment(d, version); err != nil {
				return nil, fmt.Errorf("%s: Deployment %s: %w", src, d.Name, err)
			}
		}
		objs = append(objs, obj)
	}
	if eppName == "" {
		return nil, fmt.Errorf("%s: no Deployment (the endpoint picker)", src)
	}
	// Names to rename, then every string equal to one of them (names,
	// labels, selectors, serviceAccountName, volumes, roleRef, subjects).
	rename := map[string]string{eppName: EPPName}
	trees := make([]any, len(objs))
	for i, obj := range objs {
		j, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(j, &trees[i]); err != nil {
			return nil, err
		}
		name, _ := trees[i].(map[string]any)["metadata"].(map[string]any)["name"].(string)
		if _, ok := rename[name]; !ok {
			rename[name] = EPPName + "-" + name
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s#\n# The endpoint picker of the example overlay's InferencePool %q, rendered\n# from %s@%s\n# %s (deploy/epp.go says what changes).\n",
		header, PoolName, GIEModule, version, gieManifests)
	for _, tree := range trees {
		tree = renameStrings(dropEmpty(tree), rename)
		out, err := yaml.Marshal(tree)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.Bytes(), nil
}

// eppDeployment points the EPP at PoolName in the pod's namespace and
// checks its image is the pinned version's.
func eppDeployment(d *appsv1.Deployment, version string) error {
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		return fmt.Errorf("%d containers, want 1 (the EPP)", len(cs))
	}
	c := &cs[0]
	if !strings.HasSuffix(c.Image, ":"+version) {
		return fmt.Errorf("image %s is not the pinned version %s", c.Image, version)
	}
	set := map[string]string{"--pool-name": PoolName, "--pool-namespace": "$(POD_NAMESPACE)"}
	for i := 0; i+1 < len(c.Args); i++ {
		if v, ok := set[c.Args[i]]; ok {
			c.Args[i+1] = v
			delete(set, c.Args[i])
		}
	}
	for flag := range set {
		return fmt.Errorf("no %s argument to set", flag)
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "POD_NAMESPACE",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	return nil
}

// dropEmpty removes what marshalling a typed object adds and the
// published manifests do not have: status, and null creationTimestamps.
func dropEmpty(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	delete(m, "status")
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if e == nil && k == "creationTimestamp" {
					delete(x, k)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(m)
	return m
}

// renameStrings returns v with every string that is a key of rename
// replaced by its value.
func renameStrings(v any, rename map[string]string) any {
	switch x := v.(type) {
	case string:
		if r, ok := rename[x]; ok {
			return r
		}
	case map[string]any:
		for k, e := range x {
			x[k] = renameStrings(e, rename)
		}
	case []any:
		for i, e := range x {
			x[i] = renameStrings(e, rename)
		}
	}
	return v
}

// splitYAML splits a multi-document YAML stream at its "---" lines,
// dropping empty documents and comment-only ones.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		empty := true
		for _, line := range strings.Split(string(d), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, d)
		}
	}
	return docs
}
