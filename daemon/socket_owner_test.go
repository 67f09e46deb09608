package daemon

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picometer/picometer/schema"
)

// TestEmitterRefusesSquatter reproduces finding 4 (issue 13): a socket
// another local user created at the daemon's path received its events. The
// emitter now connects only to a socket owned by its own uid or a trusted
// uid or gid. The squatter's socket is made by this (root) process and
// handed to uid 65534, as if that user had made it.
func TestEmitterRefusesSquatter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to give the socket to another uid)")
	}
	sock := filepath.Join(socketDir(t), "squat.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chown(sock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	err = checkSocketOwner(sock, 0, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534 gid 65534, not by this process's uid 0") {
		t.Fatalf("checkSocketOwner: %v", err)
	}

	start := func(uids, gids []int) *Emitter {
		cfg := DefaultConfig().Metrics
		cfg.Socket = sock
		cfg.TrustedUIDs, cfg.TrustedGIDs = uids, gids
		cfg.BackoffMin, cfg.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
		e := NewEmitter(cfg, "b00t", schema.HelloBody{Model: "m", Engine: "e"}, slog.New(slog.DiscardHandler), time.Now)
		return e
	}
	e := start(nil, nil)
	e.Request(&schema.Request{RequestBody: schema.RequestBody{ID: "x"}})
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("the emitter connected to a squatter's socket")
	case <-time.After(500 * time.Millisecond):
	}
	if e.Connects() != 0 {
		t.Fatalf("connects = %d, want 0", e.Connects())
	}
	e.Close(0)

	// Trusting the squatter's group (an operator's choice) connects.
	for _, trust := range [][2][]int{{{65534}, nil}, {nil, {65534}}} {
		e := start(trust[0], trust[1])
		e.Request(&schema.Request{RequestBody: schema.RequestBody{ID: "x"}})
		select {
		case c := <-accepted:
			c.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("trusted %v: the emitter did not connect", trust)
		}
		e.Close(0)
	}
}

func TestCheckSocketOwnerNotASocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	os.WriteFile(p, nil, 0o600)
	if err := checkSocketOwner(p, os.Geteuid(), nil, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v", err)
	}
}
