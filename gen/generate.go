// Package gen holds the protocol code generator: spec loads and resolves spec/*.yaml, check
// applies the rules every spec must follow, emit renders Go with jennifer, and cmd/filagen writes
// the packages under generated/ (atomically, and only the files it owns).
//
// Run `go generate ./...` (or `make generate`) from the repository root to regenerate every
// protocol package.
package gen

//go:generate go run ./cmd/filagen -spec ../spec/fibp.yaml -source spec/fibp.yaml -out ../generated/fibp
//go:generate go run ./cmd/filagen -spec ../spec/rift.yaml -source spec/rift.yaml -out ../generated/riftproto -package riftproto
//go:generate go run ./cmd/filagen -spec ../spec/store.yaml -source spec/store.yaml -out ../generated/store
//go:generate go run ./cmd/filagen -spec ../spec/riftstore.yaml -source spec/riftstore.yaml -out ../generated/riftstore
//go:generate go run ./cmd/filagen -spec ../spec/queuelog.yaml -source spec/queuelog.yaml -out ../generated/queuelog
//go:generate go run ./cmd/filagen -spec ../spec/cluster.yaml -source spec/cluster.yaml -out ../generated/cluster
