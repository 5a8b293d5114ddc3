// Command ferretdb runs FerretDB, an open-source MongoDB wire-protocol server, with its
// SQLite backend, for Chorus's tests (no Docker, no MongoDB install: only Go).
//
// FerretDB's own cmd/ferretdb panics when installed with `go install` (it needs a generated
// version file), so this embeds its package github.com/FerretDB/FerretDB/ferretdb instead.
//
//	ferretdb -listen-addr 127.0.0.1:27017 -state-dir /tmp/data [-bulk-write]
//
// It prints "ready mongodb://127.0.0.1:27017/" on stdout once the port listens, and runs
// until SIGINT or SIGTERM (or, with -exit-on-stdin-eof, until its stdin is closed: the test
// process that started it died, even by SIGKILL, so no server is left behind), then closes
// the listener, gives open connections up to three seconds (FerretDB's own grace period)
// and closes the SQLite databases. A second signal kills it at once. The data in
// -state-dir survives a restart.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"

	"github.com/FerretDB/FerretDB/build/version"
	"github.com/FerretDB/FerretDB/ferretdb"
)

const module = "github.com/FerretDB/FerretDB"

// fixes is set by build.sh (-ldflags "-X main.fixes=...") once it has applied its fixes to
// FerretDB (atomic read-modify-write commands, reads narrowed by _id), and is reported in
// the version, so a client can tell this build from a stock one.
var fixes string

func main() {
	addr := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on")
	stateDir := flag.String("state-dir", "", "directory for the SQLite databases (created if missing)")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	stdinEOF := flag.Bool("exit-on-stdin-eof", false, "stop when stdin is closed (parent died)")
	bulkWrite := flag.Bool("bulk-write", false,
		"answer MongoDB 8's bulkWrite and report wire version 25, as MongoDB 8.0 does")
	flag.Parse()
	if *bulkWrite {
		// Read by the bulkWrite command build.sh adds to FerretDB's handler package, which
		// this module cannot import.
		_ = os.Setenv("CHORUS_FERRETDB_BULK_WRITE", "1")
	}
	// A test server's heap is small: letting it grow to 5x the live heap before a
	// collection (GOGC=400) rather than 2x cut the server's CPU per turn by about a
	// quarter under bench.profile's load.
	debug.SetGCPercent(400)

	if *stateDir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: ferretdb -listen-addr HOST:PORT -state-dir DIR [-log-level warn] [-bulk-write]")
		os.Exit(2)
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb: -log-level:", err)
		os.Exit(2)
	}

	dir, err := filepath.Abs(*stateDir)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb: -state-dir:", err)
		os.Exit(1)
	}

	// FerretDB's SQLite handler wants a "file:" URI naming an existing directory, with a
	// trailing slash; it adds its own pragmas (WAL journal, busy timeout). synchronous=NORMAL:
	// in WAL mode a commit then no longer waits for an fsync (the default, FULL, spent half
	// the server's CPU in the kernel under load); a crash of this process still loses
	// nothing committed, only a power cut could, which a test server can afford.
	sqliteURL := (&url.URL{Scheme: "file", Opaque: filepath.ToSlash(dir) + "/",
		RawQuery: url.Values{"_pragma": {"synchronous(normal)"}}.Encode()}).String()

	// Embedded builds report "unknown" as buildInfo's ferretdbVersion: report the module's.
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == module {
				version.Get().Version = dep.Version
				if fixes != "" {
					version.Get().Version += "+" + fixes
				}
			}
		}
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	// New binds the listening socket (v1.24: clientconn.Listen), so a failure to bind,
	// such as a port in use, is reported here, and once it returns the port accepts
	// connections (they queue until Run starts serving them).
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *addr},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		<-ctx.Done()
		stop() // restore default handling: a second signal kills the process at once
	}()
	if *stdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}

	fmt.Println("ready", f.MongoDBURI())

	// Run returns (with a nil error) once ctx is canceled and everything is closed.
	err = f.Run(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}
