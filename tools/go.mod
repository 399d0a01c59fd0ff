module github.com/filamq/fila/tools

go 1.26

replace (
	github.com/filamq/fila/client => ../client
	github.com/filamq/fila/generated => ../generated
)

require (
	github.com/filamq/fila/generated v0.0.0-00010101000000-000000000000
	github.com/schollz/progressbar/v3 v3.19.1
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/term v0.44.0 // indirect
)
