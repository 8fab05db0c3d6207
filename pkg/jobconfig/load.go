package jobconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrVersion is returned for a run.json written for another schema version.
var ErrVersion = errors.New("unsupported run config version")

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("invalid run config")

// Load reads, decodes and validates the run config at path.
func Load(path string) (*RunConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load run config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load run config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates a run config. Unknown fields are refused, so a
// typo or a field from a newer operator is an error rather than a silent
// default.
func Parse(data []byte) (*RunConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg RunConfig
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: trailing data after the JSON object")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Marshal validates cfg and encodes it as indented JSON, the form the
// operator stores in the ConfigMap.
func Marshal(cfg *RunConfig) ([]byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode run config: %w", err)
	}
	return append(data, '\n'), nil
}
