package aro

import _ "embed" // the section's JSON schema

//go:embed schema.json
var configSchema []byte

// ConfigSchema implements sources.Schema: the JSON schema of the aro
// section, from which the chart's values schema is generated.
func (Provider) ConfigSchema() []byte { return configSchema }
