// Command saslclient produces records with franz-go over a SASL listener (OAUTHBEARER, SCRAM-SHA-256,
// SCRAM-SHA-512 or PLAIN; TLS when -ca is given), reads them back from the start of the
// topic's partition 0, and prints one JSON line:
//
//	{"produced":N,"consumed":N,"match":true} or {"error":"..."}
//
// Used by tests/integration/test_sasl_scram.py.
//
//	saslclient -bootstrap HOST:PORT -topic T -mechanism SCRAM-SHA-512 -user U -password P [-ca ca.pem] [-records 100]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"flag"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	bootstrap := flag.String("bootstrap", "", "broker address")
	topic := flag.String("topic", "", "topic (partition 0 is written and read)")
	mechanism := flag.String("mechanism", "SCRAM-SHA-512", "SASL mechanism")
	user := flag.String("user", "", "user name")
	password := flag.String("password", "", "password")
	caFile := flag.String("ca", "", "PEM CA to trust: connect with TLS")
	records := flag.Int("records", 100, "records to produce")
	flag.Parse()
	out := json.NewEncoder(os.Stdout)
	fail := func(format string, args ...any) {
		_ = out.Encode(map[string]any{"error": fmt.Sprintf(format, args...)})
		os.Exit(1)
	}

	var mech sasl.Mechanism
	auth := scram.Auth{User: *user, Pass: *password}
	switch *mechanism {
	case "SCRAM-SHA-256":
		mech = auth.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		mech = auth.AsSha512Mechanism()
	case "PLAIN":
		mech = plain.Auth{User: *user, Pass: *password}.AsMechanism()
	case "OAUTHBEARER":
		// The token comes as -password (a JWT the test signed).
		mech = oauth.Auth{Token: *password}.AsMechanism()
	default:
		fail("unknown mechanism %s", *mechanism)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap),
		kgo.SASL(mech),
		kgo.DefaultProduceTopic(*topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: {0: kgo.NewOffset().AtStart()}}),
	}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fail("ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("ca: no certificate in %s", *caFile)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	want := make([]string, *records)
	for i := range want {
		want[i] = fmt.Sprintf("franz-%d", i)
		r := &kgo.Record{Value: []byte(want[i]), Partition: 0}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			fail("produce: %v", err)
		}
	}
	var got []string
	for len(got) < len(want) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			fail("consume: %v after %d records", err, len(got))
		}
		for _, e := range fetches.Errors() {
			fail("fetch: %v", e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	match := len(got) >= len(want)
	for i := range want {
		match = match && got[len(got)-len(want)+i] == want[i]
	}
	_ = out.Encode(map[string]any{"produced": len(want), "consumed": len(got), "match": match})
}
