// Command txnfailfast starts a franz-go transactional producer against a broker and
// reports how its first transactional produce ends: {"error": "..."} or {"ok": true}.
// Used by tests/integration/test_txn_fail_fast.py: a broker without transactions must
// make it fail with a clear error before the bound, not retry forever.
//
//	txnfailfast -bootstrap HOST:PORT -topic T -txn-id ID [-bound 60s]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "", "broker address")
	topic := flag.String("topic", "", "topic to produce to")
	txnID := flag.String("txn-id", "", "transactional id")
	bound := flag.Duration("bound", 60*time.Second, "give up after this long (a hang, reported as such)")
	flag.Parse()

	out := json.NewEncoder(os.Stdout)
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.TransactionalID(*txnID), kgo.DefaultProduceTopic(*topic))
	if err != nil {
		_ = out.Encode(map[string]any{"error": fmt.Sprintf("client: %v", err)})
		os.Exit(2)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *bound)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		_ = out.Encode(map[string]any{"error": err.Error(), "step": "begin"})
		return
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		_ = out.Encode(map[string]any{"error": err.Error(), "step": "produce", "timed_out": ctx.Err() != nil})
		return
	}
	_ = out.Encode(map[string]any{"ok": true})
}
