package podspec

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// YAML prints the objects as one YAML stream, in creation order, for a reviewer:
// the same objects always give the same bytes (keys sorted; the server-set
// creationTimestamp and the empty status left out).
func (o Objects) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range []any{o.NetworkPolicy, o.Pod} {
		m, err := toMap(obj)
		if err != nil {
			return nil, err
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("printing the objects: %w", err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(out)
	}
	return buf.Bytes(), nil
}

func toMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("printing the objects: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("printing the objects: %w", err)
	}
	return m, nil
}
