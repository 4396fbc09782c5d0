// Command txnadmin runs franz-go's admin client (kadm) transaction calls against a broker
// and prints what each returned, one JSON line per call:
//
//	{"call":"list","transactions":[...]} or {"call":"list","error":"..."}
//	{"call":"describe","id":ID,"state":S} or {"call":"describe","id":ID,"error":"..."}
//
// Used by tests/integration/test_txn_admin.py: a broker without transactions must answer
// both promptly (an empty list; an error for an unknown id), not make kadm retry forever.
//
//	txnadmin -bootstrap HOST:PORT -txn-id ID [-bound 60s]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "", "broker address")
	txnID := flag.String("txn-id", "", "transactional id to describe")
	bound := flag.Duration("bound", 60*time.Second, "give up after this long (a hang, reported as such)")
	flag.Parse()

	out := json.NewEncoder(os.Stdout)
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap))
	if err != nil {
		_ = out.Encode(map[string]any{"error": fmt.Sprintf("client: %v", err)})
		os.Exit(2)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	ctx, cancel := context.WithTimeout(context.Background(), *bound)
	defer cancel()
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		_ = out.Encode(map[string]any{"call": "list", "error": err.Error(), "timed_out": ctx.Err() != nil})
	} else {
		ids := []string{}
		ids = append(ids, listed.TransactionalIDs()...)
		_ = out.Encode(map[string]any{"call": "list", "transactions": ids})
	}

	described, err := adm.DescribeTransactions(ctx, *txnID)
	if err != nil {
		_ = out.Encode(map[string]any{"call": "describe", "id": *txnID, "error": err.Error(), "timed_out": ctx.Err() != nil})
		return
	}
	d, ok := described[*txnID]
	switch {
	case !ok:
		_ = out.Encode(map[string]any{"call": "describe", "id": *txnID, "error": "no answer for the id"})
	case d.Err != nil:
		_ = out.Encode(map[string]any{"call": "describe", "id": *txnID, "error": d.Err.Error(), "timed_out": ctx.Err() != nil})
	default:
		_ = out.Encode(map[string]any{"call": "describe", "id": *txnID, "state": d.State})
	}
}
