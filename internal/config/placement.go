package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Placement returns the runs' Pod placement of the Kubernetes runtime as Kubernetes' own types:
// Tolerations and Affinity decoded from the configuration as a manifest's fields are (unknown
// fields are an error). Errors name the field.
func (k Kubernetes) Placement() (tolerations []corev1.Toleration, affinity *corev1.Affinity, err error) {
	if len(k.Tolerations) > 0 {
		if err := decodeStrict(k.Tolerations, &tolerations); err != nil {
			return nil, nil, fmt.Errorf("tolerations: %w", err)
		}
	}
	if len(k.Affinity) > 0 {
		affinity = &corev1.Affinity{}
		if err := decodeStrict(k.Affinity, affinity); err != nil {
			return nil, nil, fmt.Errorf("affinity: %w", err)
		}
	}
	return tolerations, affinity, nil
}

// ResourceRequests decodes Requests into Kubernetes' own type: only "cpu" and "memory", each a
// positive quantity (resource.ParseQuantity's syntax: 250m, 0.5, 256Mi). It returns nil when
// Requests is empty.
func (k Kubernetes) ResourceRequests() (corev1.ResourceList, error) {
	if len(k.Requests) == 0 {
		return nil, nil
	}
	list := corev1.ResourceList{}
	for _, name := range slices.Sorted(maps.Keys(k.Requests)) {
		if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) {
			return nil, fmt.Errorf("requests: %q is not cpu or memory", name)
		}
		q, err := resource.ParseQuantity(k.Requests[name])
		if err != nil {
			return nil, fmt.Errorf("requests.%s: %q: %w", name, k.Requests[name], err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("requests.%s: must be positive, got %q", name, k.Requests[name])
		}
		list[corev1.ResourceName(name)] = q
	}
	return list, nil
}

// CheckPlacement reports whether Placement decodes.
func (k Kubernetes) CheckPlacement() error {
	_, _, err := k.Placement()
	return err
}

// decodeStrict converts v (YAML decoded into maps) into out through JSON, refusing unknown
// fields.
func decodeStrict(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}
