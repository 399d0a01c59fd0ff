package nodelink

import (
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// netCounter counts what NetworkTransport's connections write, and its heartbeats (the
// transport does not say which RPCs are heartbeats: the count is left at 0).
type netCounter struct{ bytes atomic.Uint64 }

func (c *netCounter) load() (uint64, uint64, uint64) { return 0, 0, c.bytes.Load() }

type countingStream struct {
	net.Listener
	c *netCounter
}

func (s *countingStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: s.c}, nil
}

func (s *countingStream) Accept() (net.Conn, error) {
	conn, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: s.c}, nil
}

type countingConn struct {
	net.Conn
	c *netCounter
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.c.bytes.Add(uint64(n))
	return n, err
}

// cpuTime is the process's user and system CPU time.
type cpuTime time.Duration

func readCPU() cpuTime {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuTime(time.Duration(ru.Utime.Nano() + ru.Stime.Nano()))
}

func (c cpuTime) Seconds() float64 { return time.Duration(c).Seconds() }
