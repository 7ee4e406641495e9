module github.com/cordonhq/cordon

go 1.26.8

require (
	github.com/rogpeppe/go-internal v1.16.0
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
