module github.com/filamq/fila/client

go 1.26

replace github.com/filamq/fila/generated => ../generated
