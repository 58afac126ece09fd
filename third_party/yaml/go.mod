module go.yaml.in/yaml/v4

go 1.18
