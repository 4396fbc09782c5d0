// Command txneos runs franz-go's exactly-once consume-transform-produce loop (a
// GroupTransactSession) over a broker and prints what each transaction did, one JSON line
// each; used by tests/integration/test_transactions.py, which checks the output topic.
//
// It consumes the topic -in in group -group (read_committed, RequireStableFetchOffsets),
// and for each polled batch (at most -batch records) begins a transaction, writes one record
// per input record to -out (same partition and key, value "out:" + input value, written
// with ProduceSync so it is in the log), and ends the transaction: with a commit, which also
// commits the consumed offsets in the transaction (TxnOffsetCommit), except the transaction
// numbered -abort-txn (counted from 0), which it aborts: its output records are in the log
// but aborted, and the session rewinds to the group's committed offsets, so those input
// records are processed again. It stops once -count input records were committed.
//
//	{"txn":K,"records":N,"end":"commit"|"abort"|"not-committed"}
//	{"done":true,"committed_records":C,"txns":K}   or   {"error":"...","timed_out":bool}
//
//	txneos -bootstrap HOST:PORT -group G -in IN -out OUT -txn-id ID -count N
//	       [-abort-txn 1] [-batch 40] [-bound 180s]
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
	group := flag.String("group", "", "consumer group")
	in := flag.String("in", "", "input topic")
	outTopic := flag.String("out", "", "output topic")
	txnID := flag.String("txn-id", "", "transactional id")
	count := flag.Int("count", 0, "stop once this many input records were committed")
	abortTxn := flag.Int("abort-txn", 1, "the transaction (counted from 0) to abort; -1: none")
	batch := flag.Int("batch", 40, "at most this many records per transaction")
	bound := flag.Duration("bound", 180*time.Second, "give up after this long (reported as a failure)")
	flag.Parse()

	out := json.NewEncoder(os.Stdout)
	fail := func(ctx context.Context, format string, args ...any) {
		_ = out.Encode(map[string]any{"error": fmt.Sprintf(format, args...), "timed_out": ctx.Err() != nil})
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *bound)
	defer cancel()

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(*bootstrap),
		kgo.TransactionalID(*txnID),
		kgo.TransactionTimeout(60*time.Second),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		fail(ctx, "client: %v", err)
	}
	defer sess.Close()

	committed := 0
	txn := 0
	for committed < *count {
		if ctx.Err() != nil {
			fail(ctx, "bound reached after %d committed records", committed)
		}
		fetches := sess.PollRecords(ctx, *batch)
		if errs := fetches.Errors(); len(errs) > 0 {
			if ctx.Err() != nil {
				fail(ctx, "poll: %v", errs[0].Err)
			}
			_ = out.Encode(map[string]any{"poll_error": errs[0].Err.Error()})
			continue
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			fail(ctx, "begin: %v", err)
		}
		for _, r := range recs {
			o := &kgo.Record{Topic: *outTopic, Partition: r.Partition, Key: r.Key,
				Value: append([]byte("out:"), r.Value...)}
			if err := sess.ProduceSync(ctx, o).FirstErr(); err != nil {
				fail(ctx, "produce: %v", err)
			}
		}
		try := kgo.TryCommit
		if txn == *abortTxn {
			try = kgo.TryAbort
		}
		ok, err := sess.End(ctx, try)
		if err != nil {
			fail(ctx, "end transaction %d: %v", txn, err)
		}
		end := "not-committed"
		switch {
		case try == kgo.TryAbort:
			end = "abort"
		case ok:
			end = "commit"
			committed += len(recs)
		}
		_ = out.Encode(map[string]any{"txn": txn, "records": len(recs), "end": end})
		txn++
	}
	_ = out.Encode(map[string]any{"done": true, "committed_records": committed, "txns": txn})
}
