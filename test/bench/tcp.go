package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"
)

// The TCP helpers: a plain Go TCP stream over the same veth, what users would pick
// without RDMA. tcp-rx accepts one connection and reads until EOF; tcp-tx writes
// -size-byte messages (one Write each; Go sets TCP_NODELAY) for -for.

func tcpRx(args []string) error {
	fs := flag.NewFlagSet("tcp-rx", flag.ContinueOnError)
	port := fs.Int("port", 5201, "TCP port to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println("ready")
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	var total, firstRead int64
	var first, last time.Time
	for {
		k, err := c.Read(buf)
		if k > 0 {
			last = time.Now()
			if total == 0 {
				first, firstRead = last, int64(k)
			}
			total += int64(k)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if total <= firstRead || !last.After(first) {
		return fmt.Errorf("tcp-rx: %d bytes received", total)
	}
	// Goodput between the first and the last read, in bytes per second.
	fmt.Printf("result bytes=%d goodput=%g\n", total, float64(total-firstRead)/last.Sub(first).Seconds())
	return nil
}

func tcpTx(args []string) error {
	fs := flag.NewFlagSet("tcp-tx", flag.ContinueOnError)
	dst := fs.String("dst", "", "receiver's address")
	port := fs.Int("port", 5201, "receiver's TCP port")
	size := fs.Int("size", 65536, "bytes per Write")
	dur := fs.Duration("for", time.Second, "how long to send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(*dst, fmt.Sprint(*port)), 10*time.Second)
	if err != nil {
		return err
	}
	msg := make([]byte, *size)
	start := time.Now()
	sent := 0
	for time.Since(start) < *dur {
		if _, err := c.Write(msg); err != nil {
			c.Close()
			return err
		}
		sent++
	}
	if err := c.Close(); err != nil {
		return err
	}
	fmt.Printf("result messages=%d\n", sent)
	return nil
}
