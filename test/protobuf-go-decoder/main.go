// protobuf-go's reading of RateLimitRequest bytes, for the codec test
// (test/integration/rls-codec-protobuf-go.test.ts). envoyproxy/ratelimit decodes requests with
// protobuf-go (grpc-go's proto codec: proto.Unmarshal with default options), so its answer is
// the judge of what bytes mean.
//
// Reads one message per line of stdin, in hex, and writes one line of JSON per message: the
// request in @grpc/proto-loader's shape (snake_case names, 64-bit integers as decimal strings,
// an absent message field as null, the unit as its number), or {"error": "..."}.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

type entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type limit struct {
	RequestsPerUnit uint32 `json:"requests_per_unit"`
	Unit            int32  `json:"unit"`
}

type hits struct {
	Value string `json:"value"`
}

type descriptor struct {
	Entries    []entry `json:"entries"`
	Limit      *limit  `json:"limit"`
	HitsAddend *hits   `json:"hits_addend"`
}

type request struct {
	Domain      string       `json:"domain"`
	Descriptors []descriptor `json:"descriptors"`
	HitsAddend  uint32       `json:"hits_addend"`
}

type answer struct {
	Ok    *request `json:"ok,omitempty"`
	Error string   `json:"error,omitempty"`
}

func decode(line string) answer {
	bytes, err := hex.DecodeString(line)
	if err != nil {
		return answer{Error: "test input is not hex: " + err.Error()}
	}
	var msg rlsv3.RateLimitRequest
	if err := proto.Unmarshal(bytes, &msg); err != nil {
		return answer{Error: err.Error()}
	}
	out := request{Domain: msg.GetDomain(), Descriptors: []descriptor{}, HitsAddend: msg.GetHitsAddend()}
	for _, d := range msg.GetDescriptors() {
		desc := descriptor{Entries: []entry{}}
		for _, e := range d.GetEntries() {
			desc.Entries = append(desc.Entries, entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		if l := d.GetLimit(); l != nil {
			desc.Limit = &limit{RequestsPerUnit: l.GetRequestsPerUnit(), Unit: int32(l.GetUnit())}
		}
		if h := d.GetHitsAddend(); h != nil {
			desc.HitsAddend = &hits{Value: strconv.FormatUint(h.GetValue(), 10)}
		}
		out.Descriptors = append(out.Descriptors, desc)
	}
	return answer{Ok: &out}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		if err := enc.Encode(decode(in.Text())); err != nil {
			panic(err)
		}
	}
	if err := in.Err(); err != nil {
		panic(err)
	}
	if err := out.Flush(); err != nil {
		panic(err)
	}
}
