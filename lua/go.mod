module github.com/filamq/fila/lua

go 1.26.0

require (
	github.com/yuin/gopher-lua v1.1.2
	golang.org/x/sys v0.47.0
)
