module github.com/filamq/fila

go 1.26

require (
	github.com/dave/jennifer v1.7.1
	gopkg.in/yaml.v3 v3.0.1
)
