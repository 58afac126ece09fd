module github.com/airlock-mcp/airlock

go 1.26.0

require (
	github.com/BurntSushi/toml v1.5.0
	github.com/invopop/jsonschema v0.14.0
	github.com/mark3labs/mcp-go v1.2.1
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2
	github.com/seccomp/libseccomp-golang v0.11.1
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.42.0
)

require (
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/buger/jsonparser v1.1.2 // indirect
	github.com/google/jsonschema-go v0.4.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/pb33f/ordered-map/v2 v2.3.1 // indirect
	github.com/spf13/cast v1.7.1 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.2 // indirect
)

// mcp-go's server imports this package for validation airlock leaves off; upstream's init
// compiles every draft's metaschema (~3 ms CPU per process start). The copy compiles them on
// first use instead: third_party/jsonschema/AIRLOCK.md.
replace github.com/santhosh-tekuri/jsonschema/v6 => ./third_party/jsonschema

// mcp-go's mcp package imports this package for schemas airlock reflects with invopop
// instead; upstream's inits build its field tables and a regexp in every process (~0.3 ms
// of CPU per start). The copy builds them on first use: third_party/jsonschema-go/AIRLOCK.md.
replace github.com/google/jsonschema-go => ./third_party/jsonschema-go

// invopop/jsonschema's ordered maps (pb33f/ordered-map) import this package; upstream's
// init compiles two regexps in every process (~0.08 ms per start). The copy compiles them
// on first use: third_party/yaml/AIRLOCK.md.
replace go.yaml.in/yaml/v4 => ./third_party/yaml

// The configuration's TOML parser; upstream's init asks for the local time zone's offset,
// reading and parsing /etc/localtime in every process (~0.1 ms per start). The copy asks
// on first use: third_party/toml/AIRLOCK.md.
replace github.com/BurntSushi/toml => ./third_party/toml
