module github.com/filamq/fila/tools/compare

go 1.26.0

replace (
	github.com/filamq/fila/client => ../../client
	github.com/filamq/fila/generated => ../../generated
	github.com/filamq/fila/tools => ..
)

require (
	github.com/filamq/fila/client v0.0.0-00010101000000-000000000000
	github.com/filamq/fila/generated v0.0.0-00010101000000-000000000000
	github.com/filamq/fila/tools v0.0.0-00010101000000-000000000000
	github.com/nats-io/nats.go v1.55.0
	github.com/quic-go/quic-go v0.65.0
	github.com/schollz/progressbar/v3 v3.19.1
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/filamq/fila/lua v0.0.0-00010101000000-000000000000
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/term v0.46.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/filamq/fila/lua => ../../lua
