// Package certs serves FIBP's TLS certificates: a Reloader holds the server certificate and the
// client CA bundle loaded from their files and loads them again on request (fila-server does so
// on SIGHUP), so that a renewed certificate takes effect for new connections while the open ones
// go on with the session they negotiated. It also issues throw-away certificates (a local CA, a
// server certificate, a client certificate) for trying TLS and mTLS on loopback
// (fila-server dev-certs DIR).
package certs
