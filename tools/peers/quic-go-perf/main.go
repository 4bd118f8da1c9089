// A perf pair on quic-go (Debian's golang-github-lucas-clemente-quic-go-dev, 0.29), the
// benchmark suite's quic-go baseline. It speaks Braid's perf exchange (after
// draft-banks-quic-performance): the client opens a bidirectional stream and sends an 8-byte
// big-endian byte count, then ends its side; the server answers with that many bytes of
// Braid's pattern (byte i is ((i % 65521) * 2654435761) >> 7, truncated) and ends the stream.
//
// Built offline in GOPATH mode (the benchmark command does it):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o quic-go-perf .
//
//	quic-go-perf server --port 0 --cert server.pem --key server-key.pem   # prints "listening <port>"
//	quic-go-perf client --port P --bytes N [--ca ca.pem] [--verify]         # prints one JSON line
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	quic "github.com/lucas-clemente/quic-go"
)

const alpn = "perf"
const period = 65521
const chunk = 64 * 1024

// pattern holds one period plus a chunk, so any chunk starting anywhere in the period is one slice.
var pattern = func() []byte {
	table := make([]byte, period+chunk)
	for i := range table {
		table[i] = byte(((uint64(i%period) * 2654435761) >> 7) & 0xff)
	}
	return table
}()

// Windows as large as Braid's auto-tuning reaches (16 MiB per stream, 24 MiB per connection),
// so flow control does not decide the comparison.
func config() *quic.Config {
	return &quic.Config{
		MaxIdleTimeout:             30 * time.Second,
		InitialStreamReceiveWindow: 1 << 20, MaxStreamReceiveWindow: 16 << 20,
		InitialConnectionReceiveWindow: 4 << 20, MaxConnectionReceiveWindow: 24 << 20,
	}
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: quic-go-perf server|client [flags]"))
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	host := flags.String("host", "127.0.0.1", "address to listen on or connect to")
	port := flags.Int("port", 0, "UDP port (server: 0 picks one)")
	cert := flags.String("cert", "", "server certificate chain (PEM)")
	key := flags.String("key", "", "server private key (PEM)")
	ca := flags.String("ca", "", "client: trusted CA (PEM)")
	sni := flags.String("sni", "localhost", "client: server name")
	bytes := flags.Int64("bytes", 0, "client: bytes to download")
	verify := flags.Bool("verify", false, "client: check every byte against the pattern")
	_ = flags.Parse(os.Args[2:])
	address := net.JoinHostPort(*host, fmt.Sprint(*port))
	switch os.Args[1] {
	case "server":
		fail(serve(address, *cert, *key))
	case "client":
		fail(download(address, *ca, *sni, *bytes, *verify))
	default:
		fail(fmt.Errorf("unknown role %q", os.Args[1]))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "quic-go-perf:", err)
		os.Exit(1)
	}
}

func serve(address, certFile, keyFile string) error {
	certificate, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	listener, err := quic.ListenAddr(address, &tls.Config{Certificates: []tls.Certificate{certificate}, NextProtos: []string{alpn}}, config())
	if err != nil {
		return err
	}
	fmt.Printf("listening %d\n", listener.Addr().(*net.UDPAddr).Port)
	for {
		connection, err := listener.Accept(context.Background())
		if err != nil {
			return err
		}
		go func() {
			for {
				stream, err := connection.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go answer(stream)
			}
		}()
	}
}

// answer reads the request (a byte count, then the end of the client's side) and sends that
// many pattern bytes.
func answer(stream quic.Stream) {
	request, err := io.ReadAll(stream)
	if err != nil || len(request) < 8 {
		stream.CancelWrite(1)
		return
	}
	remaining := int64(binary.BigEndian.Uint64(request[:8]))
	var offset int64
	for remaining > 0 {
		n := int64(chunk)
		if remaining < n {
			n = remaining
		}
		start := offset % period
		if _, err := stream.Write(pattern[start : start+n]); err != nil {
			return
		}
		offset += n
		remaining -= n
	}
	stream.Close()
}

func download(address, caFile, sni string, bytes int64, verify bool) error {
	roots := x509.NewCertPool()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("no certificate in %s", caFile)
		}
	}
	connection, err := quic.DialAddr(address, &tls.Config{RootCAs: roots, ServerName: sni, NextProtos: []string{alpn}}, config())
	if err != nil {
		return err
	}
	defer connection.CloseWithError(0, "")
	start := time.Now()
	stream, err := connection.OpenStreamSync(context.Background())
	if err != nil {
		return err
	}
	request := make([]byte, 8)
	binary.BigEndian.PutUint64(request, uint64(bytes))
	if _, err := stream.Write(request); err != nil {
		return err
	}
	stream.Close()
	buffer := make([]byte, chunk)
	var received int64
	for {
		n, err := stream.Read(buffer)
		if verify {
			for i := 0; i < n; i++ {
				if buffer[i] != pattern[(received+int64(i))%period] {
					return fmt.Errorf("byte %d differs from the pattern", received+int64(i))
				}
			}
		}
		received += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	seconds := time.Since(start).Seconds()
	if received != bytes {
		return fmt.Errorf("received %d bytes of %d", received, bytes)
	}
	report, _ := json.Marshal(map[string]any{"bytes": received, "seconds": seconds})
	fmt.Println(string(report))
	return nil
}
