package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// secretName is the Secret the manifests read, made by secret.sh.
const secretName = "wmrl-db"

// The worker roles: Deployment name, its --queues argument, its replicas.
var workerRoles = []struct {
	name     string
	args     []string
	replicas int32
}{
	{"control", []string{"--queues=control,rollout,worldmodel"}, 1},
	{"sandbox", []string{"--queues=sandbox"}, 2},
	{"gpu", []string{"--queues=gpu"}, 1},
}

// workerEnv is every worker's plain environment (compose's x-worker).
var workerEnv = map[string]string{
	"TEMPORAL_ADDRESS":  "temporal:7233",
	"TEMPORAL_TLS_CA":   "/run/secrets/wmrl-tls/ca.pem",
	"TEMPORAL_TLS_CERT": "/run/secrets/wmrl-tls/client.pem",
	"TEMPORAL_TLS_KEY":  "/run/secrets/wmrl-tls/client-key.pem",
	"WMRL_DATA_DIR":     "/data",
	"WMRL_CACHE":        "/data/cache",
	"HOME":              "/tmp",
	"WMRL_SANDBOX":      "process",
	"WMRL_METRICS_ADDR": "0.0.0.0:9464",
}

var temporalCheck = []string{"/usr/local/bin/temporal-dev", "check", "--address=auto:7233", "--timeout=4s",
	"--tls-ca=/run/secrets/wmrl-tls/ca.pem", "--tls-cert=/run/secrets/wmrl-tls/server.pem",
	"--tls-key=/run/secrets/wmrl-tls/server-key.pem", "--tls-server-name=temporal"}

// newDecoder decodes YAML strictly into the typed objects of the kinds the
// manifests may use: an unknown or duplicate field, or any other kind, is
// an error.
func newDecoder(t testing.TB) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
}

// object is one decoded document.
type object struct {
	where string // file:document
	obj   runtime.Object
}

// decodeAll decodes every document of a multi-document YAML stream.
func decodeAll(dec runtime.Decoder, name string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if j, err := yaml.YAMLToJSON(doc); err == nil && string(bytes.TrimSpace(j)) == "null" {
			continue // only comments
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		objs = append(objs, object{where: fmt.Sprintf("%s:%d", name, i), obj: obj})
	}
}

// manifestFiles are the YAML files of this directory and its
// subdirectories, but for testdata and kustomization.yaml.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".yaml") && path != "kustomization.yaml" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests found")
	}
	return files
}

// TestManifestsDecodeStrictly decodes every document of every manifest,
// the examples included, into its Kubernetes type.
func TestManifestsDecodeStrictly(t *testing.T) {
	dec := newDecoder(t)
	n := 0
	for _, f := range manifestFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(dec, f, data)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(objs) == 0 {
			t.Errorf("%s: no objects", f)
		}
		n += len(objs)
	}
	t.Logf("%d objects decoded strictly", n)
}

// TestStrictDecodingRefuses shows the decoder is strict: a misspelled
// field, a field given twice and an unknown kind each fail, and the same
// document corrected decodes.
func TestStrictDecodingRefuses(t *testing.T) {
	dec := newDecoder(t)
	good, err := os.ReadFile("testdata/misspelled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fixed := bytes.Replace(good, []byte("imagePullPolicyy:"), []byte("imagePullPolicy:"), 1)
	if bytes.Equal(fixed, good) {
		t.Fatal("testdata/misspelled.yaml has no misspelled imagePullPolicyy")
	}
	if _, err := decodeAll(dec, "corrected", fixed); err != nil {
		t.Fatalf("the corrected document: %v", err)
	}
	duplicate := bytes.Replace(fixed, []byte("image: wmrl\n"), []byte("image: wmrl\n          image: wmrl-temporal\n"), 1)
	unknownKind := bytes.Replace(fixed, []byte("kind: Deployment"), []byte("kind: Deploymnet"), 1)
	for _, tt := range []struct {
		name     string
		give     []byte
		want     string
		isStrict bool
	}{
		{"misspelled field", good, `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`, true},
		{"duplicate field", duplicate, `key "image" already set in map`, true},
		{"unknown kind", unknownKind, `no kind "Deploymnet" is registered`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeAll(dec, tt.name, tt.give)
			if err == nil {
				t.Fatal("decoded without error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if tt.isStrict && !runtime.IsStrictDecodingError(errors.Unwrap(err)) {
				t.Errorf("error %q is not a strict decoding error", err)
			}
		})
	}
}

// built is the kustomization built as kubectl apply -k builds it, decoded.
func built(t *testing.T) []object {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(newDecoder(t), "kustomize build", y)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func readKustomization(t *testing.T) kustomize.Kustomization {
	t.Helper()
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomize.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k
}

// TestKustomization checks kustomization.yaml: it lists every manifest of
// this directory (the examples stay out), sets a tag for each image the
// manifests use, and its build puts every object in its namespace with
// those tags.
func TestKustomization(t *testing.T) {
	k := readKustomization(t)
	if k.Namespace == "" {
		t.Error("kustomization.yaml: no namespace")
	}
	var top []string
	for _, f := range manifestFiles(t) {
		if filepath.Dir(f) == "." {
			top = append(top, f)
		}
	}
	if got := slices.Sorted(slices.Values(k.Resources)); !slices.Equal(got, top) {
		t.Errorf("kustomization.yaml resources = %v, want the manifests %v", got, top)
	}
	tags := map[string]string{}
	for _, im := range k.Images {
		if im.NewTag == "" || im.Digest != "" {
			t.Errorf("kustomization.yaml image %s: want newTag (and no digest)", im.Name)
		}
		ref := im.Name
		if im.NewName != "" {
			ref = im.NewName
		}
		tags[im.Name] = ref + ":" + im.NewTag
	}

	// The manifests name untagged images, each of which the kustomization tags.
	dec := newDecoder(t)
	for _, f := range manifestFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(dec, f, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			for _, c := range containers(o.obj) {
				if _, ok := tags[c.Image]; !ok {
					t.Errorf("%s: container %s: image %q is not an untagged image of kustomization.yaml (%v)",
						o.where, c.Name, c.Image, slices.Sorted(maps.Keys(tags)))
				}
			}
		}
	}

	objs := built(t)
	if len(objs) == 0 {
		t.Fatal("the build is empty")
	}
	want := slices.Sorted(maps.Values(tags))
	for _, o := range objs {
		if ns := meta(o.obj).GetNamespace(); ns != k.Namespace {
			t.Errorf("built %s %s: namespace %q, want %q", kind(o.obj), meta(o.obj).GetName(), ns, k.Namespace)
		}
		for _, c := range containers(o.obj) {
			if !slices.Contains(want, c.Image) {
				t.Errorf("built %s %s: image %q, want one of %v", kind(o.obj), meta(o.obj).GetName(), c.Image, want)
			}
		}
	}
	t.Logf("kustomize build: %d objects in namespace %s, images %v", len(objs), k.Namespace, want)
}

// documentedSecretKeys are the keys of the Secret that README.md lists
// between its secret-keys markers.
func documentedSecretKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(data, []byte("<!-- secret-keys -->"))
	block, _, ok2 := bytes.Cut(rest, []byte("<!-- /secret-keys -->"))
	if !ok || !ok2 {
		t.Fatal("README.md: no <!-- secret-keys --> ... <!-- /secret-keys --> block")
	}
	var keys []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([-._a-zA-Z0-9]+)` \\|").FindAllSubmatch(block, -1) {
		keys = append(keys, string(m[1]))
	}
	if len(keys) == 0 {
		t.Fatal("README.md: the secret-keys block lists no key")
	}
	return keys
}

// TestSecretScript runs secret.sh --dry-run (kubectl, no cluster needed):
// the Secret it makes holds exactly the documented keys, and the DSN holds
// the password.
func TestSecretScript(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not on the PATH")
	}
	cmd := exec.Command("bash", "secret.sh", "--dry-run")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("secret.sh --dry-run: %v: %s", err, stderr.String())
	}
	objs, err := decodeAll(newDecoder(t), "secret.sh --dry-run", out)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("secret.sh --dry-run printed %d objects, want 1", len(objs))
	}
	s, ok := objs[0].obj.(*corev1.Secret)
	if !ok || s.Name != secretName || s.Namespace != readKustomization(t).Namespace {
		t.Fatalf("secret.sh --dry-run printed %s %s/%s, want Secret %s in the kustomization's namespace",
			kind(objs[0].obj), meta(objs[0].obj).GetNamespace(), meta(objs[0].obj).GetName(), secretName)
	}
	if got, want := slices.Sorted(maps.Keys(s.Data)), slices.Sorted(slices.Values(documentedSecretKeys(t))); !slices.Equal(got, want) {
		t.Errorf("secret.sh makes the keys %v, README.md documents %v", got, want)
	}
	pw := string(s.Data["postgres-password"])
	if len(pw) < 24 {
		t.Errorf("postgres-password has %d characters, want at least 24", len(pw))
	}
	if want := "postgres://postgres:" + pw + "@postgres:5432/wmrl?sslmode=disable"; string(s.Data["database-url"]) != want {
		t.Error("database-url is not postgres://postgres:<postgres-password>@postgres:5432/wmrl?sslmode=disable")
	}
}

// TestCrossReferences checks that the built manifests, with the examples,
// agree with each other and with the Secret's documented keys.
func TestCrossReferences(t *testing.T) {
	objs := built(t)
	hpa, err := os.ReadFile("examples/sandbox-hpa.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := decodeAll(newDecoder(t), "examples/sandbox-hpa.yaml", hpa)
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, ex...)

	keys := documentedSecretKeys(t)
	used := map[string]bool{}
	secretKey := func(where, name, key string) {
		if name != secretName {
			t.Errorf("%s: Secret %q, want %q (the one secret.sh makes)", where, name, secretName)
		} else if !slices.Contains(keys, key) {
			t.Errorf("%s: Secret key %q is not one of README.md's %v", where, key, keys)
		}
		used[key] = true
	}

	byKind := map[string]map[string]runtime.Object{}
	for _, o := range objs {
		k, n := kind(o.obj), meta(o.obj).GetName()
		if byKind[k] == nil {
			byKind[k] = map[string]runtime.Object{}
		}
		if _, dup := byKind[k][n]; dup {
			t.Errorf("two %s named %s", k, n)
		}
		byKind[k][n] = o.obj
	}
	pvcs := byKind["PersistentVolumeClaim"]

	for _, o := range objs {
		spec, labels, selector, claims := podTemplate(o.obj)
		if spec == nil {
			continue
		}
		where := kind(o.obj) + " " + meta(o.obj).GetName()
		if selector != nil && !subset(selector, labels) {
			t.Errorf("%s: selector %v does not match its pod template's labels %v", where, selector, labels)
		}
		sc := spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65534 {
			t.Errorf("%s: want securityContext runAsNonRoot: true, runAsUser: 65534", where)
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v
			switch {
			case v.PersistentVolumeClaim != nil:
				if pvcs[v.PersistentVolumeClaim.ClaimName] == nil {
					t.Errorf("%s: volume %s: no PersistentVolumeClaim %q", where, v.Name, v.PersistentVolumeClaim.ClaimName)
				}
			case v.Secret != nil:
				if len(v.Secret.Items) == 0 {
					t.Errorf("%s: volume %s: name the Secret's keys (items)", where, v.Name)
				}
				for _, it := range v.Secret.Items {
					secretKey(where+" volume "+v.Name, v.Secret.SecretName, it.Key)
				}
			}
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			cw := where + " container " + c.Name
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secretKey(cw+" env "+e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					t.Errorf("%s: envFrom Secret %s: name each key (env valueFrom) instead", cw, ef.SecretRef.Name)
				}
			}
			for _, m := range c.VolumeMounts {
				if _, ok := volumes[m.Name]; !ok && !slices.Contains(claims, m.Name) {
					t.Errorf("%s: volumeMount %s: no such volume", cw, m.Name)
				}
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", cw, r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					t.Errorf("%s: no %s limit", cw, r)
				}
			}
			if s := c.SecurityContext; s == nil || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
				s.ReadOnlyRootFilesystem == nil || s.Capabilities == nil || !slices.Contains(s.Capabilities.Drop, "ALL") {
				t.Errorf("%s: want securityContext allowPrivilegeEscalation: false, readOnlyRootFilesystem set, capabilities drop ALL", cw)
			}
		}
	}
	for _, k := range keys {
		if !used[k] {
			t.Errorf("README.md documents Secret key %q, which no manifest uses", k)
		}
	}

	// Every Service selects a pod template, and its target ports are that
	// pod's container ports.
	for name, obj := range byKind["Service"] {
		svc := obj.(*corev1.Service)
		if len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s: no selector", name)
			continue
		}
		var matched []string
		for _, o := range objs {
			spec, labels, _, _ := podTemplate(o.obj)
			if spec == nil || !subset(svc.Spec.Selector, labels) {
				continue
			}
			matched = append(matched, kind(o.obj)+" "+meta(o.obj).GetName())
			for _, p := range svc.Spec.Ports {
				if !hasPort(spec, p.TargetPort) {
					t.Errorf("Service %s port %s: target %s is not a container port of %s %s",
						name, p.Name, p.TargetPort.String(), kind(o.obj), meta(o.obj).GetName())
				}
			}
		}
		if len(matched) == 0 {
			t.Errorf("Service %s: selector %v matches no pod template", name, svc.Spec.Selector)
		}
	}
	for name, obj := range byKind["StatefulSet"] {
		if s := obj.(*appsv1.StatefulSet); byKind["Service"][s.Spec.ServiceName] == nil {
			t.Errorf("StatefulSet %s: no Service %q", name, s.Spec.ServiceName)
		}
	}

	// The worker roles.
	deployments := byKind["Deployment"]
	for _, r := range workerRoles {
		obj := deployments[r.name]
		if obj == nil {
			t.Errorf("no Deployment %s (worker role)", r.name)
			continue
		}
		d := obj.(*appsv1.Deployment)
		where := "Deployment " + r.name
		if d.Spec.Replicas == nil || *d.Spec.Replicas != r.replicas {
			t.Errorf("%s: replicas %s, want %d", where, replicas(d), r.replicas)
		}
		if len(d.Spec.Template.Spec.Containers) != 1 {
			t.Errorf("%s: %d containers, want 1", where, len(d.Spec.Template.Spec.Containers))
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		if !strings.HasPrefix(c.Image, "wmrl:") || len(c.Command) != 0 || !slices.Equal(c.Args, r.args) {
			t.Errorf("%s: image %s command %q args %q, want wmrl:<tag> (entrypoint wmrl-worker) args %q",
				where, c.Image, c.Command, c.Args, r.args)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			} else if e.ValueFrom.SecretKeyRef != nil {
				env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		want := maps.Clone(workerEnv)
		want["WMRL_DATABASE_URL"] = "secret:database-url"
		if !maps.Equal(env, want) {
			t.Errorf("%s: env %v, want %v", where, env, want)
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		vols := map[string]corev1.Volume{}
		for _, v := range d.Spec.Template.Spec.Volumes {
			vols[v.Name] = v
		}
		if v := vols[mounts["/data"]]; v.PersistentVolumeClaim == nil {
			t.Errorf("%s: /data is not a PersistentVolumeClaim", where)
		} else if pvc, ok := pvcs[v.PersistentVolumeClaim.ClaimName].(*corev1.PersistentVolumeClaim); ok &&
			!slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
			t.Errorf("%s: /data's claim %s is not ReadWriteMany", where, pvc.Name)
		}
		if v := vols[mounts["/tmp"]]; v.EmptyDir == nil {
			t.Errorf("%s: /tmp is not an emptyDir", where)
		}
	}

	// Temporal: its arguments, its password and its probes.
	if obj := deployments["temporal"]; obj == nil {
		t.Error("no Deployment temporal")
	} else {
		d := obj.(*appsv1.Deployment)
		c := d.Spec.Template.Spec.Containers[0]
		wantArgs := []string{"serve", "--ip=auto", "--port=7233", "--ui-port=8233", "--ui-ip=auto", "--postgres=postgres:5432", "--postgres-user=postgres"}
		if !strings.HasPrefix(c.Image, "wmrl-temporal:") || len(c.Args) < len(wantArgs) || !slices.Equal(c.Args[:len(wantArgs)], wantArgs) {
			t.Errorf("Deployment temporal: image %s args %q, want wmrl-temporal:<tag> args starting %q", c.Image, c.Args, wantArgs)
		}
		// The Web UI answers the Service with the server's certificate: read-only,
		// unless writes come with its OIDC login.
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--ui-write-actions") }) &&
			!slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--ui-auth-provider-url=") }) {
			t.Errorf("Deployment temporal: args %q turn the Web UI's writes on without its authentication", c.Args)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Error("Deployment temporal: want one replica, replaced by Recreate")
		}
		password := false
		for _, e := range c.Env {
			password = password || e.Name == "TEMPORAL_POSTGRES_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}
		if !password {
			t.Error("Deployment temporal: TEMPORAL_POSTGRES_PASSWORD is not from the Secret")
		}
		for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, temporalCheck) {
				t.Errorf("Deployment temporal: %s probe, want exec %q", name, temporalCheck)
			} else if p.TimeoutSeconds <= 4 {
				t.Errorf("Deployment temporal: %s probe timeoutSeconds %d, want more than check's --timeout=4s", name, p.TimeoutSeconds)
			}
		}
	}

	// Postgres: the password file and the databases.
	if obj := byKind["StatefulSet"]["postgres"]; obj == nil {
		t.Error("no StatefulSet postgres")
	} else {
		s := obj.(*appsv1.StatefulSet)
		c := s.Spec.Template.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["POSTGRES_DATABASES"] != "wmrl" {
			t.Errorf("StatefulSet postgres: POSTGRES_DATABASES %q, want wmrl", env["POSTGRES_DATABASES"])
		}
		file := env["POSTGRES_PASSWORD_FILE"]
		mounted := false
		for _, m := range c.VolumeMounts {
			for _, v := range s.Spec.Template.Spec.Volumes {
				if v.Name != m.Name || v.Secret == nil {
					continue
				}
				for _, it := range v.Secret.Items {
					mounted = mounted || filepath.Join(m.MountPath, it.Path) == file && it.Key == "postgres-password"
				}
			}
		}
		if !mounted {
			t.Errorf("StatefulSet postgres: POSTGRES_PASSWORD_FILE %q is not the Secret's postgres-password", file)
		}
		if c.ReadinessProbe == nil {
			t.Error("StatefulSet postgres: no readiness probe")
		}
		if len(s.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("StatefulSet postgres: %d volumeClaimTemplates, want 1", len(s.Spec.VolumeClaimTemplates))
		}
	}

	// The migrate Job.
	if obj := byKind["Job"]["migrate"]; obj == nil {
		t.Error("no Job migrate")
	} else if c := obj.(*batchv1.Job).Spec.Template.Spec.Containers[0]; !slices.Equal(c.Command, []string{"/usr/local/bin/wmrl", "migrate"}) {
		t.Errorf("Job migrate: command %q, want /usr/local/bin/wmrl migrate", c.Command)
	}

	// The HPA example scales the sandbox workers.
	for name, obj := range byKind["HorizontalPodAutoscaler"] {
		h := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || deployments[ref.Name] == nil {
			t.Errorf("HorizontalPodAutoscaler %s: target %s %s %s is no Deployment here", name, ref.APIVersion, ref.Kind, ref.Name)
		}
		if len(h.Spec.Metrics) == 0 || h.Spec.Metrics[0].Type != autoscalingv2.ExternalMetricSourceType {
			t.Errorf("HorizontalPodAutoscaler %s: want an External metric", name)
		}
	}
	if byKind["HorizontalPodAutoscaler"]["sandbox"] == nil {
		t.Error("no HorizontalPodAutoscaler sandbox in examples/")
	}
}

// podTemplate returns the pod spec, the pod labels, the selector's labels
// and the volume claim templates' names of a workload (nil for other
// kinds).
func podTemplate(obj runtime.Object) (*corev1.PodSpec, map[string]string, map[string]string, []string) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec, o.Spec.Template.Labels, o.Spec.Selector.MatchLabels, nil
	case *appsv1.StatefulSet:
		var claims []string
		for _, c := range o.Spec.VolumeClaimTemplates {
			claims = append(claims, c.Name)
		}
		return &o.Spec.Template.Spec, o.Spec.Template.Labels, o.Spec.Selector.MatchLabels, claims
	case *batchv1.Job:
		return &o.Spec.Template.Spec, o.Spec.Template.Labels, nil, nil
	}
	return nil, nil, nil, nil
}

func containers(obj runtime.Object) []corev1.Container {
	spec, _, _, _ := podTemplate(obj)
	if spec == nil {
		return nil
	}
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

func hasPort(spec *corev1.PodSpec, target intstr.IntOrString) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if target.Type == intstr.String && p.Name == target.StrVal ||
				target.Type == intstr.Int && p.ContainerPort == target.IntVal {
				return true
			}
		}
	}
	return false
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// replicas is a Deployment's replicas, or "unset".
func replicas(d *appsv1.Deployment) string {
	if d.Spec.Replicas == nil {
		return "unset"
	}
	return fmt.Sprint(*d.Spec.Replicas)
}

// kind is the kind the object was decoded from.
func kind(obj runtime.Object) string { return obj.GetObjectKind().GroupVersionKind().Kind }

func meta(obj runtime.Object) metav1.Object {
	m, err := apimeta.Accessor(obj)
	if err != nil {
		panic(err) // every kind the decoder knows has metadata
	}
	return m
}

// composeFile is the part of deploy/compose/docker-compose.yml the parity
// test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `json:"image"`
		Command     []string          `json:"command"`
		Entrypoint  []string          `json:"entrypoint"`
		Environment map[string]string `json:"environment"`
		Volumes     []string          `json:"volumes"`
		Tmpfs       []string          `json:"tmpfs"`
		Profiles    []string          `json:"profiles"`
		Healthcheck *struct {
			Test []string `json:"test"`
		} `json:"healthcheck"`
	} `json:"services"`
}

// secretFiles are the files a compose service mounts from .secrets/, by
// their path in the container.
func secretFiles(volumes []string) []string {
	var out []string
	for _, v := range volumes {
		if src, dst, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, "./.secrets/") {
			out = append(out, strings.TrimSuffix(dst, ":ro"))
		}
	}
	slices.Sort(out)
	return out
}

// podSecretFiles are the files a container mounts from Secrets, by their
// path in the container.
func podSecretFiles(spec *corev1.PodSpec, c corev1.Container) []string {
	var out []string
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				out = append(out, filepath.Join(m.MountPath, it.Path))
			}
		}
	}
	slices.Sort(out)
	return out
}

// composePath is the compose deployment the manifests mirror.
const composePath = "../compose/docker-compose.yml"

// TestComposeParity checks the manifests against the compose deployment:
// the same worker roles with the same arguments, environment and volumes,
// the same secret files (TLS) at the same paths, the same Temporal command
// and health check, Postgres environment and
// migration command.
func TestComposeParity(t *testing.T) {
	data, err := os.ReadFile(composePath)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is not in this tree", composePath)
	}
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatalf("%s: %v", composePath, err)
	}
	if len(cf.Services) == 0 {
		t.Fatalf("%s: no services", composePath)
	}
	byKind := map[string]map[string]runtime.Object{}
	for _, o := range built(t) {
		if byKind[kind(o.obj)] == nil {
			byKind[kind(o.obj)] = map[string]runtime.Object{}
		}
		byKind[kind(o.obj)][meta(o.obj).GetName()] = o.obj
	}
	plainEnv := func(c corev1.Container) map[string]string {
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
		return env
	}

	// Workers: compose's services of ${WMRL_IMAGE} serving queues, counted
	// by their command, are the Deployments with those arguments.
	type role struct {
		count   int
		env     map[string]string
		svc     string
		secrets []string
	}
	roles := map[string]*role{}
	for name, s := range cf.Services {
		if len(s.Profiles) > 0 || len(s.Command) != 1 || !strings.HasPrefix(s.Command[0], "--queues=") {
			continue
		}
		if s.Image != "${WMRL_IMAGE}" {
			t.Errorf("compose %s: image %s, want ${WMRL_IMAGE}", name, s.Image)
		}
		if !slices.Contains(s.Volumes, "data:/data") || len(s.Tmpfs) != 1 || !strings.HasPrefix(s.Tmpfs[0], "/tmp:") {
			t.Errorf("compose %s: volumes %v tmpfs %v, want data:/data and a tmpfs at /tmp, as the Deployments have", name, s.Volumes, s.Tmpfs)
		}
		r := roles[s.Command[0]]
		if r == nil {
			r = &role{env: s.Environment, svc: name, secrets: secretFiles(s.Volumes)}
			roles[s.Command[0]] = r
		}
		r.count++
	}
	if len(roles) == 0 {
		t.Fatalf("%s: no worker services", composePath)
	}
	seen := map[string]bool{}
	for _, obj := range byKind["Deployment"] {
		d := obj.(*appsv1.Deployment)
		c := d.Spec.Template.Spec.Containers[0]
		if len(c.Args) != 1 || !strings.HasPrefix(c.Args[0], "--queues=") {
			continue
		}
		r := roles[c.Args[0]]
		if r == nil {
			t.Errorf("Deployment %s (%s): no compose service serves those queues", d.Name, c.Args[0])
			continue
		}
		seen[c.Args[0]] = true
		if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != r.count {
			t.Errorf("Deployment %s: replicas %s, compose runs %d", d.Name, replicas(d), r.count)
		}
		if got := plainEnv(c); !maps.Equal(got, r.env) {
			t.Errorf("Deployment %s: environment %v, compose %s has %v", d.Name, got, r.svc, r.env)
		}
		if got := podSecretFiles(&d.Spec.Template.Spec, c); !slices.Equal(got, r.secrets) {
			t.Errorf("Deployment %s: secret files %q, compose %s mounts %q", d.Name, got, r.svc, r.secrets)
		}
	}
	for q, r := range roles {
		if !seen[q] {
			t.Errorf("compose %s (%s): no Deployment with those arguments", r.svc, q)
		}
	}

	// Temporal.
	if s, ok := cf.Services["temporal"]; !ok {
		t.Error("compose: no service temporal")
	} else if d, ok := byKind["Deployment"]["temporal"].(*appsv1.Deployment); ok {
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Equal(c.Args, s.Command) {
			t.Errorf("Deployment temporal: args %q, compose command %q", c.Args, s.Command)
		}
		if got, want := podSecretFiles(&d.Spec.Template.Spec, c), secretFiles(s.Volumes); !slices.Equal(got, want) {
			t.Errorf("Deployment temporal: secret files %q, compose mounts %q", got, want)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || !slices.Equal(c.ReadinessProbe.Exec.Command, s.Healthcheck.Test[1:]) {
			t.Errorf("Deployment temporal: readiness probe is not compose's health check %v", s.Healthcheck)
		}
		if s.Image != "${WMRL_TEMPORAL_IMAGE}" || !strings.HasPrefix(c.Image, "wmrl-temporal:") {
			t.Errorf("temporal: image %s here, %s in compose", c.Image, s.Image)
		}
	}

	// Postgres.
	if s, ok := cf.Services["postgres"]; !ok {
		t.Error("compose: no service postgres")
	} else if st, ok := byKind["StatefulSet"]["postgres"].(*appsv1.StatefulSet); ok {
		c := st.Spec.Template.Spec.Containers[0]
		env := plainEnv(c)
		for k, v := range s.Environment {
			if _, ok := env[k]; !ok {
				t.Errorf("StatefulSet postgres: no %s (compose sets it)", k)
			} else if k != "POSTGRES_PASSWORD_FILE" && env[k] != v {
				t.Errorf("StatefulSet postgres: %s=%q, compose %q", k, env[k], v)
			}
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 ||
			c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || !slices.Equal(c.ReadinessProbe.Exec.Command, s.Healthcheck.Test[1:]) {
			t.Errorf("StatefulSet postgres: readiness probe is not compose's health check %v", s.Healthcheck)
		}
		if s.Image != "${WMRL_POSTGRES_IMAGE}" || !strings.HasPrefix(c.Image, "wmrl-postgres:") {
			t.Errorf("postgres: image %s here, %s in compose", c.Image, s.Image)
		}
	}

	// The migration.
	if s, ok := cf.Services["migrate"]; !ok {
		t.Error("compose: no service migrate")
	} else if j, ok := byKind["Job"]["migrate"].(*batchv1.Job); ok {
		if c := j.Spec.Template.Spec.Containers[0]; !slices.Equal(c.Command, s.Entrypoint) {
			t.Errorf("Job migrate: command %q, compose entrypoint %q", c.Command, s.Entrypoint)
		}
	}
}
