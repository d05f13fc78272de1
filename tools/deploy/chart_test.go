package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// chart is the chart's directory, and root the repository's.
var (
	root  = filepath.Join("..", "..")
	chart = filepath.Join(root, "deploy", "helm", "iterion")
	full  = filepath.Join(chart, "ci", "full-values.yaml")
)

// helm runs the pinned helm (go tool helm, this module's tool).
func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "helm"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

func TestLint(t *testing.T) {
	helm(t, "lint", "--strict", chart)
	helm(t, "lint", "--strict", chart, "-f", full)
}

// rendered is what helm template made, by kind.
type rendered struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap
	secret         *corev1.Secret
	pvc            *corev1.PersistentVolumeClaim
	service        *corev1.Service
	serviceAccount *corev1.ServiceAccount
	ingress        *networkingv1.Ingress
	networkPolicy  *networkingv1.NetworkPolicy
	serviceMonitor *serviceMonitor
	prometheusRule *prometheusRule
	kinds          []string
}

// The Prometheus operator's two kinds, with the fields the chart writes:
// its API module is not worth a dependency for two shapes.
type serviceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   objectMeta         `json:"metadata"`
	Spec       serviceMonitorSpec `json:"spec"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Endpoints []struct {
		Port     string `json:"port"`
		Path     string `json:"path"`
		Interval string `json:"interval"`
	} `json:"endpoints"`
}

type prometheusRule struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       ruleFile   `json:"spec"`
}

type objectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// ruleFile is Prometheus' rule file (and a PrometheusRule's spec).
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// strict decodes YAML into v, refusing a field v's type does not have.
func strict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// template renders the chart with the values files and decodes every
// manifest strictly into its type.
func template(t *testing.T, values ...string) rendered {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "bots"}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	var r rendered
	for _, doc := range strings.Split(helm(t, args...), "\n---\n") {
		doc = strings.TrimSpace(strings.TrimPrefix(doc, "---"))
		if doc == "" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("a rendered manifest is not YAML: %v\n%s", err, doc)
		}
		var v any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			r.deployment = &appsv1.Deployment{}
			v = r.deployment
		case "v1 ConfigMap":
			r.configMap = &corev1.ConfigMap{}
			v = r.configMap
		case "v1 Secret":
			r.secret = &corev1.Secret{}
			v = r.secret
		case "v1 PersistentVolumeClaim":
			r.pvc = &corev1.PersistentVolumeClaim{}
			v = r.pvc
		case "v1 Service":
			r.service = &corev1.Service{}
			v = r.service
		case "v1 ServiceAccount":
			r.serviceAccount = &corev1.ServiceAccount{}
			v = r.serviceAccount
		case "networking.k8s.io/v1 Ingress":
			r.ingress = &networkingv1.Ingress{}
			v = r.ingress
		case "networking.k8s.io/v1 NetworkPolicy":
			r.networkPolicy = &networkingv1.NetworkPolicy{}
			v = r.networkPolicy
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.serviceMonitor = &serviceMonitor{}
			v = r.serviceMonitor
		case "monitoring.coreos.com/v1 PrometheusRule":
			r.prometheusRule = &prometheusRule{}
			v = r.prometheusRule
		default:
			t.Fatalf("the chart renders a %s %s this test does not know", head.APIVersion, head.Kind)
		}
		if err := strict([]byte(doc), v); err != nil {
			t.Errorf("%s: %v\n%s", head.Kind, err, doc)
		}
		r.kinds = append(r.kinds, head.Kind)
	}
	return r
}

// checkServeConfig runs iterion serve --check on the ConfigMap's serve.yml:
// the file the pod reads is one serve takes.
func checkServeConfig(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serve.yml")
	if err := os.WriteFile(path, []byte(cm.Data["serve.yml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/iterion", "serve", "--check", "--config", path)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "ITERION_CONFIG=", "ITERION_ADDR=", "ITERION_STORE=", "ITERION_GITHUB_APP_ID=")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), ": ok") {
		t.Errorf("iterion serve --check on the chart's serve.yml: %v\n%s\n%s", err, out, cm.Data["serve.yml"])
	}
}

func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if d == nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("the chart renders no Deployment with one container")
	}
	return d.Spec.Template.Spec.Containers[0]
}

// The default values: one replica replaced by Recreate, its store on a
// claim kept on uninstall, probes on /healthz and /readyz, non-root,
// nothing optional rendered, no Secret when none is given.
func TestDefaults(t *testing.T) {
	r := template(t)
	d := r.deployment
	c := container(t, d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %v, strategy %q: want one replica, Recreate (Badger has one owner)", d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes on %q and %q", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.RunAsUser != 10001 {
		t.Error("the pod does not run as the image's non-root user")
	}
	sc := c.SecurityContext
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined || sc.AppArmorProfile == nil ||
		sc.ProcMount != nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v: want Unconfined seccomp and AppArmor for bwrap, no procMount, no privilege escalation, a read-only root", sc)
	}
	if pod.HostUsers != nil {
		t.Errorf("hostUsers set by default: %v", *pod.HostUsers)
	}
	var claim string
	for _, v := range pod.Volumes {
		if v.Name == "data" && v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if r.pvc == nil || claim != r.pvc.Name || r.pvc.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the store's claim: volume %q, pvc %+v", claim, r.pvc)
	}
	if len(c.EnvFrom) != 0 || r.secret != nil {
		t.Error("a Secret is rendered or read without secrets configured")
	}
	if r.ingress != nil || r.networkPolicy != nil || r.serviceMonitor != nil || r.prometheusRule != nil {
		t.Errorf("an optional part is rendered by default: %v", r.kinds)
	}
	if r.serviceAccount == nil || r.serviceAccount.AutomountServiceAccountToken == nil || *r.serviceAccount.AutomountServiceAccountToken {
		t.Error("the service account mounts a Kubernetes token iterion does not use")
	}
	checkServeConfig(t, r.configMap)
}

// Every optional part on: each decodes into its type and says what the
// values asked.
func TestFullValues(t *testing.T) {
	r := template(t, full)
	d := r.deployment
	c := container(t, d)
	pod := d.Spec.Template.Spec
	if pod.HostUsers == nil || *pod.HostUsers || c.SecurityContext.ProcMount == nil || *c.SecurityContext.ProcMount != corev1.UnmaskedProcMount {
		t.Error("sandbox.hostUsers false does not give the pod its own user namespace and an unmasked /proc")
	}
	if len(c.EnvFrom) != 1 || r.secret == nil || c.EnvFrom[0].SecretRef.Name != r.secret.Name {
		t.Errorf("the secrets are not read from the chart's Secret: %+v", c.EnvFrom)
	}
	if _, ok := r.secret.StringData["ITERION_GITHUB_PRIVATE_KEY"]; !ok {
		t.Error("the Secret lacks the App's private key")
	}
	var appID string
	for _, e := range c.Env {
		if e.Name == "ITERION_GITHUB_APP_ID" {
			appID = e.Value
		}
	}
	if appID != "123456" || c.Image != "registry.example.com/iterion:0.1.0-full" || c.Ports[0].ContainerPort != 9090 {
		t.Errorf("app id %q, image %q, port %d", appID, c.Image, c.Ports[0].ContainerPort)
	}
	if r.ingress == nil || r.ingress.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != r.service.Name || len(r.ingress.Spec.TLS) != 1 {
		t.Errorf("ingress %+v", r.ingress)
	}
	if r.networkPolicy == nil || len(r.networkPolicy.Spec.Egress) != 3 {
		t.Errorf("network policy %+v: want DNS, HTTPS and the extra rule", r.networkPolicy)
	}
	if r.serviceMonitor == nil || r.serviceMonitor.Spec.Endpoints[0].Path != "/metrics" || r.serviceMonitor.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("service monitor %+v", r.serviceMonitor)
	}
	if r.prometheusRule == nil || len(r.prometheusRule.Spec.Groups) == 0 || len(r.prometheusRule.Spec.Groups[0].Rules) < 5 {
		t.Errorf("prometheus rule %+v", r.prometheusRule)
	}
	checkServeConfig(t, r.configMap)
}

// A secret's key must be a variable name: anything else is refused with
// the key named.
func TestSecretKeysAreVariableNames(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("secrets:\n  values:\n    \"api token\": x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "helm", "template", "rel", chart, "-f", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "secrets.values.api token: the keys are environment variable names") {
		t.Errorf("a bad secret key: %v\n%s", err, out)
	}
}

// The alert rules file loads as Prometheus' rule file format.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chart, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := strict(b, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v lacks a name, an expression, a severity or a summary", r)
			}
		}
	}
}
