module github.com/filamq/fila/examples

go 1.26.0

replace (
	github.com/filamq/fila/client => ../client
	github.com/filamq/fila/generated => ../generated
)

require github.com/filamq/fila/client v0.0.0-00010101000000-000000000000

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/filamq/fila/generated v0.0.0-00010101000000-000000000000 // indirect
	github.com/quic-go/quic-go v0.65.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
