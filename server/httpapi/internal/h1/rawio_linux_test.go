package h1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln := h1test.MustListen(t)
	defer ln.Close()
	client = h1test.MustDial(t, ln.Addr().String())
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestRawIOAsNet: a connection read and written with raw system calls
// (rawio_linux.go) answers what net.Conn's Read and Write answer: the
// bytes, io.EOF at the peer's end, and the same errors — a deadline's
// timeout and a closed connection's — word for word, since a body's read
// error reaches the client in a 400 ("reading the body: …").
func TestRawIOAsNet(t *testing.T) {
	srv, cli := tcpPair(t)
	// Small socket buffers, so that a write of megabytes waits for room.
	srv.(*net.TCPConn).SetWriteBuffer(32 << 10)
	cli.(*net.TCPConn).SetReadBuffer(32 << 10)
	raw := newRawIO(srv)
	if raw == nil {
		t.Fatal("no rawIO on a TCP connection")
	}
	buf := make([]byte, 16)

	// A deadline past: the same timeout error as net's.
	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, want := srv.Read(buf)
	_, got := raw.Read(buf)
	if !isTimeout(got) || got == nil || want == nil || got.Error() != want.Error() {
		t.Fatalf("past the read deadline: raw %v, net %v", got, want)
	}
	srv.SetReadDeadline(time.Time{})

	// Bytes, then the peer's end.
	cli.Write([]byte("hello"))
	n, err := raw.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if n, err := raw.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d, %v", n, err)
	}

	// A write much larger than the socket's buffers, its reader slow: the
	// write waits for room and sends every byte, in order.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MB
	got2 := make(chan []byte)
	go func() {
		// The reader starts 50 ms late: the writer meets full buffers and
		// must wait for room (the behaviour under test).
		time.Sleep(50 * time.Millisecond)
		b, _ := io.ReadAll(io.LimitReader(cli, int64(len(big))))
		got2 <- b
	}()
	if n, err := raw.Write(big); n != len(big) || err != nil {
		t.Fatalf("wrote %d of %d: %v", n, len(big), err)
	}
	if b := <-got2; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(big))
	}

	// A write past its deadline, the peer reading nothing: the same
	// timeout as net's, and what was sent counted.
	srv.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err = raw.Write(big)
	if !isTimeout(err) || n >= len(big) {
		t.Fatalf("past the write deadline: wrote %d, %v", n, err)
	}
	_, want = srv.Write(big)
	if err.Error() != want.Error() {
		t.Fatalf("past the write deadline: raw %v, net %v", err, want)
	}

	cli.Close()
	srv2, cli2 := tcpPair(t)
	raw2 := newRawIO(srv2)
	cli2.Close()
	if _, err := raw2.Read(buf); err != io.EOF {
		t.Fatalf("the peer gone: %v, not io.EOF", err)
	}

	// Closed here: net's "use of closed network connection".
	srv2.Close()
	_, got = raw2.Read(buf)
	_, want = srv2.Read(buf)
	if !errors.Is(got, net.ErrClosed) || got.Error() != want.Error() {
		t.Fatalf("closed: raw %v, net %v", got, want)
	}
	_, got = raw2.Write([]byte("x"))
	_, want = srv2.Write([]byte("x"))
	if !errors.Is(got, net.ErrClosed) || got.Error() != want.Error() {
		t.Fatalf("closed: raw write %v, net %v", got, want)
	}
}

// TestRawIOReadWhileWriting: a read and a write of one connection at once
// (as net's may) keep apart, each its own bytes; under -race, a state the
// two shared would be reported.
func TestRawIOReadWhileWriting(t *testing.T) {
	srv, cli := tcpPair(t)
	raw := newRawIO(srv)
	out := bytes.Repeat([]byte("w"), 4<<20)
	in := bytes.Repeat([]byte("r"), 4<<20)
	wrote := make(chan error, 1)
	go func() {
		n, err := raw.Write(out)
		if err == nil && n != len(out) {
			err = io.ErrShortWrite
		}
		wrote <- err
	}()
	go cli.Write(in)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(cli, int64(len(out))))
		got <- b
	}()
	var read []byte
	buf := make([]byte, 64<<10)
	for len(read) < len(in) {
		n, err := raw.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, buf[:n]...)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read, in) || !bytes.Equal(<-got, out) {
		t.Fatal("the bytes read or written were not the ones sent")
	}
}

// TestPeerClosedAtOnce: the socket tells that its peer closed as soon as
// the close arrives, with nothing read — also when bytes the peer sent
// before it (a pipelined request, a TLS close alert) wait unread — and
// not before: an open connection with unread bytes is not closed.
func TestPeerClosedAtOnce(t *testing.T) {
	srv, cli := tcpPair(t)
	sock, err := srv.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if peerClosed(sock) {
		t.Fatal("an open connection seen as closed")
	}
	cli.Write([]byte("GET / HTTP/1.1\r\n"))
	if peerClosed(sock) {
		t.Fatal("an open connection with unread bytes seen as closed")
	}
	cli.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !peerClosed(sock) {
		if time.Now().After(deadline) {
			t.Fatal("the peer's close not seen in 5s")
		}
		time.Sleep(time.Millisecond)
	}
	// Reset: the peer closes with unread data on its side.
	srv2, cli2 := tcpPair(t)
	sock2, _ := srv2.(*net.TCPConn).SyscallConn()
	srv2.Write([]byte("unread"))
	cli2.(*net.TCPConn).SetLinger(0)
	cli2.Close()
	for deadline := time.Now().Add(5 * time.Second); !peerClosed(sock2); {
		if time.Now().After(deadline) {
			t.Fatal("the peer's reset not seen in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
