package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// What a server sends back to hostile input is checked as a client written from the spec would
// read it: whole frames that decode (continued bodies reassembled), server-to-client opcodes
// only, and error codes from the spec's table, in Error frames and in per-item results alike.

// badCodes returns a description of every error code in v (a decoded frame) the spec does not
// define.
func badCodes(v reflect.Value) []string {
	var out []string
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			out = append(out, badCodes(v.Elem())...)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, badCodes(v.Field(i))...)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i := range v.Len() {
			out = append(out, badCodes(v.Index(i))...)
		}
	}
	switch c := v.Interface().(type) {
	case fibp.ErrorCode:
		if !c.Known() {
			out = append(out, fmt.Sprintf("FIBP error code %#x", uint8(c)))
		}
	case riftproto.ErrorCode:
		if !c.Known() {
			out = append(out, fmt.Sprintf("Rift error code %#x", uint16(c)))
		}
	}
	return out
}

// readFIBPAnswers reads what the server sends on nc (through fr) until it closes the
// connection, wait passes without a frame or a second has passed, answering its Pings, and
// returns the first way an answer breaks the spec.
func readFIBPAnswers(nc net.Conn, fr *wire.FrameReader, wait time.Duration) error {
	var ra fibp.Reassembler
	defer ra.Close()
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		nc.SetReadDeadline(time.Now().Add(wait))
		body, err := fr.Next()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), isReset(err):
			return nil
		case err != nil:
			return fmt.Errorf("the server sent a frame that does not read: %v", err)
		}
		h, rest, err := fibp.ParseHeader(body)
		if err != nil {
			return fmt.Errorf("the server sent a frame whose header does not parse: %v", err)
		}
		whole, done, err := ra.Add(h, bytes.Clone(rest))
		if err != nil {
			return fmt.Errorf("the server's continued %v does not reassemble: %v", h.Opcode, err)
		}
		if !done {
			continue
		}
		if h.Opcode.Direction() == fibp.ClientToServer {
			return fmt.Errorf("the server sent %v, a client-to-server frame", h.Opcode)
		}
		f, err := fibp.Decode(h.Opcode, whole)
		if err != nil {
			return fmt.Errorf("the server sent %v (request %d) that does not decode: %v", h.Opcode, h.RequestID, err)
		}
		if h.Opcode == fibp.OpPing {
			nc.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.Pong{}))
		}
		if bad := badCodes(reflect.ValueOf(f)); len(bad) > 0 {
			return fmt.Errorf("the server sent %v (request %d) carrying %v", h.Opcode, h.RequestID, bad)
		}
	}
	return nil
}

// checkRiftAnswers checks the bytes a Rift stream answered: whole frames of server-to-client
// opcodes that decode, with the spec's error codes. A stream cut by a reset may end mid-frame.
func checkRiftAnswers(b []byte) error {
	for len(b) >= riftproto.LengthSize+riftproto.HeaderSize {
		n := int(binary.BigEndian.Uint32(b))
		if n < riftproto.HeaderSize || n > riftproto.MaxFrameSize {
			return fmt.Errorf("the server sent a frame length %d", n)
		}
		if len(b)-riftproto.LengthSize < n {
			return nil // cut off by the stream's end
		}
		op := riftproto.Opcode(b[riftproto.LengthSize])
		if op.Direction() == riftproto.ClientToServer {
			return fmt.Errorf("the server sent %v, a client-to-server frame", op)
		}
		f, err := riftproto.Decode(op, b[riftproto.LengthSize+1:riftproto.LengthSize+n])
		if err != nil {
			return fmt.Errorf("the server sent %v that does not decode: %v", op, err)
		}
		if bad := badCodes(reflect.ValueOf(f)); len(bad) > 0 {
			return fmt.Errorf("the server sent %v carrying %v", op, bad)
		}
		b = b[riftproto.LengthSize+n:]
	}
	return nil
}

// isReset reports a connection the server reset, which is how it may drop a hostile client.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
