// Package fuzz holds server-level fuzz targets: byte streams and frame sequences fed to a live
// broker over loopback, checking that no input crashes the server, hangs it, or affects another
// connection. Codec-level fuzz targets are generated beside the codecs in generated/.
package fuzz
