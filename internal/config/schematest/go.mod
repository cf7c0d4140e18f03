module rlproxy/internal/config/schematest

go 1.26.8

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2
	gopkg.in/yaml.v3 v3.0.1
	rlproxy v0.0.0
)

require golang.org/x/text v0.42.0 // indirect

replace rlproxy => ../../..
