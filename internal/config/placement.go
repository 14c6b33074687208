package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
