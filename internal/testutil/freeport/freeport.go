// Package freeport picks loopback ports for the test tools (the e2e
// fixtures, cmd/loadgen) to start a process on. Nothing the service runs
// imports it.
//
// A port the kernel hands out for ":0" comes from its ephemeral range, the
// range it also takes the local port of every outgoing connection from:
// once the probe's listener is closed, a connection to the apiserver or
// etcd may take the port before the process started on it binds it
// ("address already in use"). Loopback picks below that range, where
// only another listener can take it.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// rangeFile holds the kernel's ephemeral port range ("low high").
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// floor is the lowest port picked: below it are the well-known and many
// registered services' ports.
const floor = 10000

// tries is how many ports below the ephemeral range are tried before the
// kernel's pick is taken.
const tries = 50

// Loopback returns a TCP port free on 127.0.0.1 a moment ago, below the
// kernel's ephemeral range when there is room for one (see the package
// documentation), else one the kernel picks.
func Loopback() (int, error) {
	return pick(ephemeralLow(), listen)
}

// pick tries random ports in [floor, low) with probe, then ":0".
func pick(low int, probe func(port int) (int, error)) (int, error) {
	var errs []error
	if low-floor >= 1000 {
		for range tries {
			port, err := probe(floor + rand.IntN(low-floor)) //nolint:gosec // a port, not a secret
			if err == nil {
				return port, nil
			}
			errs = append(errs, err)
		}
	}
	port, err := probe(0)
	if err != nil {
		return 0, fmt.Errorf("no free loopback port: %w", errors.Join(append(errs, err)...))
	}
	return port, nil
}

// listen binds 127.0.0.1:port and returns the port bound, after closing it.
func listen(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the low end of the kernel's ephemeral port range, or 0
// where it cannot be read (not Linux): then the kernel picks.
func ephemeralLow() int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}
