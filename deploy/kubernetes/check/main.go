// Command check decodes every manifest in deploy/kubernetes strictly into the
// Kubernetes API's own Go types (k8s.io/api), so a misspelt field, a field at the wrong
// level or a value of the wrong type fails, and applies the checks a cluster's admission
// would make that matter here. (Go's JSON decoding matches field names without regard
// to case, so a field misspelt only in case passes.) It is its own module so that airlock's binary does not
// depend on the Kubernetes libraries.
//
// Usage: go run . ../*.yaml
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	bad := 0
	for _, path := range os.Args[1:] {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			if err := check(doc); err != nil {
				fmt.Fprintf(os.Stderr, "%s (document %d): %v\n", path, i+1, err)
				bad++
				continue
			}
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "%d files: every document decodes strictly into its Kubernetes type\n", len(os.Args)-1)
}

func check(doc []byte) error {
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	var obj any
	switch head.APIVersion + "/" + head.Kind {
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/Secret":
		obj = &corev1.Secret{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1/NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "node.k8s.io/v1/RuntimeClass":
		obj = &nodev1.RuntimeClass{}
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		return nil // a build tool's file, not an API object
	default:
		return fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s: %w", head.Kind, err)
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		return deployment(d)
	}
	return nil
}

// deployment applies the API server's rules that a strict decode cannot see, for the
// fields this manifest relies on.
func deployment(d *appsv1.Deployment) error {
	var errs []string
	spec := d.Spec.Template.Spec
	if d.Spec.Selector == nil || !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		errs = append(errs, "selector does not match the template's labels")
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc != nil && sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount &&
			(spec.HostUsers == nil || *spec.HostUsers) {
			errs = append(errs, c.Name+": procMount Unmasked needs hostUsers: false")
		}
		if sc != nil && sc.Privileged != nil && *sc.Privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			errs = append(errs, c.Name+": privileged with allowPrivilegeEscalation false")
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.StrVal != "" && !ports[pr.HTTPGet.Port.StrVal] {
				errs = append(errs, c.Name+": a probe names port "+pr.HTTPGet.Port.StrVal+", which the container lacks")
			}
		}
		for _, m := range c.VolumeMounts {
			found := false
			for _, v := range spec.Volumes {
				found = found || v.Name == m.Name
			}
			if !found {
				errs = append(errs, c.Name+": volume mount "+m.Name+" has no volume")
			}
		}
	}
	errs = append(errs, restricted(spec)...)
	if len(errs) > 0 {
		return fmt.Errorf("Deployment %s: %s", d.Name, strings.Join(errs, "; "))
	}
	return nil
}

// restricted checks a pod that chooses the Landlock tier (AIRLOCK_ISOLATION=landlock)
// against the "restricted" Pod Security profile it exists for: that tier needs none of
// what the profile forbids, so a manifest that asks for any of it is a mistake.
func restricted(spec corev1.PodSpec) []string {
	var errs []string
	landlock := false
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			landlock = landlock || e.Name == "AIRLOCK_ISOLATION" && e.Value == "landlock"
		}
	}
	if !landlock {
		return nil
	}
	psc := spec.SecurityContext
	if spec.HostUsers != nil && !*spec.HostUsers {
		errs = append(errs, "the Landlock tier: hostUsers: false is not needed")
	}
	podSeccomp := psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined
	podNonRoot := psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			errs = append(errs, c.Name+": restricted needs a securityContext")
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			errs = append(errs, c.Name+": restricted needs allowPrivilegeEscalation: false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, c.Name+": restricted forbids privileged")
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
			errs = append(errs, c.Name+": restricted needs capabilities: {drop: [ALL]}")
		}
		if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			errs = append(errs, c.Name+": restricted forbids procMount: Unmasked")
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined ||
			sc.SeccompProfile == nil && !podSeccomp {
			errs = append(errs, c.Name+": restricted needs seccompProfile RuntimeDefault or Localhost")
		}
		if (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) && !podNonRoot {
			errs = append(errs, c.Name+": restricted needs runAsNonRoot: true")
		}
	}
	return errs
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) > 0
}
