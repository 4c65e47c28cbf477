// A small xDS management server for floodgate's tests, built on go-control-plane.
//
// It serves RateLimitConfig resources over ADS (state of the world) to one node, and has a
// loopback HTTP admin endpoint the test drives:
//
//	POST /snapshot  {"version": "v2", "resources": [<RateLimitConfig as protojson>, ...]}
//	GET  /requests  every DiscoveryRequest received so far, with the stream's headers
//
// With -state, the last snapshot pushed is saved there and served again after a restart, so a
// test can stop the server and bring it back with the same rules.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
)

type snapshotBody struct {
	Version   string            `json:"version"`
	Resources []json.RawMessage `json:"resources"`
}

type seenRequest struct {
	StreamID      int64             `json:"stream_id"`
	NodeID        string            `json:"node_id"`
	NodeMetadata  map[string]any    `json:"node_metadata"`
	VersionInfo   string            `json:"version_info"`
	ResponseNonce string            `json:"response_nonce"`
	TypeURL       string            `json:"type_url"`
	ErrorDetail   string            `json:"error_detail,omitempty"`
	Headers       map[string]string `json:"headers"`
}

type recorder struct {
	mu       sync.Mutex
	headers  map[int64]map[string]string
	requests []seenRequest
}

func (r *recorder) open(ctx context.Context, id int64, _ string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	flat := map[string]string{}
	for k, v := range md {
		if len(v) > 0 {
			flat[k] = v[0]
		}
	}
	r.mu.Lock()
	r.headers[id] = flat
	r.mu.Unlock()
	return nil
}

func (r *recorder) request(id int64, req *discovery.DiscoveryRequest) error {
	seen := seenRequest{
		StreamID:      id,
		NodeID:        req.GetNode().GetId(),
		NodeMetadata:  req.GetNode().GetMetadata().AsMap(),
		VersionInfo:   req.GetVersionInfo(),
		ResponseNonce: req.GetResponseNonce(),
		TypeURL:       req.GetTypeUrl(),
		ErrorDetail:   req.GetErrorDetail().GetMessage(),
	}
	r.mu.Lock()
	seen.Headers = r.headers[id]
	r.requests = append(r.requests, seen)
	r.mu.Unlock()
	return nil
}

func decodeSnapshot(raw []byte) (*cache.Snapshot, error) {
	var body snapshotBody
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	resources := make([]types.Resource, 0, len(body.Resources))
	for _, item := range body.Resources {
		conf := &rlsconf.RateLimitConfig{}
		if err := protojson.Unmarshal(item, conf); err != nil {
			return nil, err
		}
		resources = append(resources, conf)
	}
	return cache.NewSnapshot(body.Version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: resources})
}

func serverCredentials(certFile, keyFile, clientCAFile string) (grpc.ServerOption, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	config := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", clientCAFile)
		}
		config.ClientCAs = pool
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return grpc.Creds(credentials.NewTLS(config)), nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "gRPC (ADS) address")
	admin := flag.String("admin", "127.0.0.1:0", "HTTP admin address")
	node := flag.String("node", "default", "node ID the snapshots are for")
	state := flag.String("state", "", "file holding the last snapshot pushed (read at start, written on push)")
	certFile := flag.String("tls-cert", "", "server certificate (enables TLS)")
	keyFile := flag.String("tls-key", "", "server key")
	clientCA := flag.String("client-ca", "", "CA for client certificates (requires them: mTLS)")
	flag.Parse()

	ctx := context.Background()
	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	if *state != "" {
		if raw, err := os.ReadFile(*state); err == nil {
			snap, err := decodeSnapshot(raw)
			if err != nil {
				log.Fatalf("state %s: %v", *state, err)
			}
			if err := snapshots.SetSnapshot(ctx, *node, snap); err != nil {
				log.Fatalf("state %s: %v", *state, err)
			}
		}
	}

	rec := &recorder{headers: map[int64]map[string]string{}}
	callbacks := server.CallbackFuncs{StreamOpenFunc: rec.open, StreamRequestFunc: rec.request}
	xds := server.NewServer(ctx, snapshots, callbacks)

	var options []grpc.ServerOption
	if *certFile != "" {
		creds, err := serverCredentials(*certFile, *keyFile, *clientCA)
		if err != nil {
			log.Fatalf("tls: %v", err)
		}
		options = append(options, creds)
	}
	grpcServer := grpc.NewServer(options...)
	discovery.RegisterAggregatedDiscoveryServiceServer(grpcServer, xds)
	grpcListener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen %s: %v", *listen, err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/snapshot", func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err == nil {
			var snap *cache.Snapshot
			if snap, err = decodeSnapshot(raw); err == nil {
				err = snapshots.SetSnapshot(r.Context(), *node, snap)
			}
		}
		if err == nil && *state != "" {
			err = os.WriteFile(*state, raw, 0o600)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/requests", func(w http.ResponseWriter, _ *http.Request) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(rec.requests)
	})
	adminListener, err := net.Listen("tcp", *admin)
	if err != nil {
		log.Fatalf("listen %s: %v", *admin, err)
	}

	go func() { _ = grpcServer.Serve(grpcListener) }()
	go func() { _ = http.Serve(adminListener, mux) }()
	// The test reads this line to learn the ports.
	fmt.Printf("ready grpc=%s admin=%s\n", grpcListener.Addr(), adminListener.Addr())

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	grpcServer.Stop()
}
