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
	_, err := readAnswers(nc, fr, wait, time.Second, nil, nil)
	return err
}

// How readAnswers stopped.
type readEnd uint8

const (
	endClosed readEnd = iota + 1 // the server closed (or reset) the connection
	endIdle                      // idle passed without a frame
	endTime                      // total passed
	endDone                      // done reported true
)

// readAnswers reads frames from nc (through fr), answering the server's Pings, checking each
// against the spec and passing it to on (when set), until the server closes the connection,
// idle passes without a frame, total passes or done (when set) reports true.
func readAnswers(nc net.Conn, fr *wire.FrameReader, idle, total time.Duration, on func(fibp.Header, fibp.Frame) error, done func() bool) (readEnd, error) {
	var ra fibp.Reassembler
	defer ra.Close()
	for end := time.Now().Add(total); ; {
		if done != nil && done() {
			return endDone, nil
		}
		if !time.Now().Before(end) {
			return endTime, nil
		}
		nc.SetReadDeadline(time.Now().Add(min(idle, time.Until(end))))
		body, err := fr.Next()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			if time.Now().Before(end) {
				return endIdle, nil
			}
			return endTime, nil
		case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), isReset(err):
			return endClosed, nil
		case err != nil:
			return 0, fmt.Errorf("the server sent a frame that does not read: %v", err)
		}
		h, rest, err := fibp.ParseHeader(body)
		if err != nil {
			return 0, fmt.Errorf("the server sent a frame whose header does not parse: %v", err)
		}
		whole, complete, err := ra.Add(h, bytes.Clone(rest))
		if err != nil {
			return 0, fmt.Errorf("the server's continued %v does not reassemble: %v", h.Opcode, err)
		}
		if !complete {
			continue
		}
		if h.Opcode.Direction() == fibp.ClientToServer {
			return 0, fmt.Errorf("the server sent %v, a client-to-server frame", h.Opcode)
		}
		f, err := fibp.Decode(h.Opcode, whole)
		if err != nil {
			return 0, fmt.Errorf("the server sent %v (request %d) that does not decode: %v", h.Opcode, h.RequestID, err)
		}
		if h.Opcode == fibp.OpPing {
			nc.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.Pong{}))
		}
		if bad := badCodes(reflect.ValueOf(f)); len(bad) > 0 {
			return 0, fmt.Errorf("the server sent %v (request %d) carrying %v", h.Opcode, h.RequestID, bad)
		}
		if on != nil {
			if err := on(h, f); err != nil {
				return 0, err
			}
		}
	}
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
