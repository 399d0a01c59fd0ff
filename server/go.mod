module github.com/filamq/fila/server

go 1.26

replace github.com/filamq/fila/generated => ../generated

require (
	github.com/google/go-cmp v0.7.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
