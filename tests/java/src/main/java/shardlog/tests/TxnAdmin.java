package shardlog.tests;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;

/**
 * The Java AdminClient's transaction calls (tests/integration/test_txn_admin.py).
 *
 *   list-transactions --bootstrap B
 *       listTransactions().all() -> {"transactions":[{"id":..,"producer_id":..,"state":..}]}
 *       or {"error":CLASS,"message":..}
 *   describe-transactions --bootstrap B --txn-ids A,B
 *       describeTransactions(ids) -> {"id":..,"state":..,"producer_id":..} or
 *       {"id":..,"error":CLASS,"message":..} per id
 *
 * default.api.timeout.ms (via --prop) bounds each call: a TimeoutException means the client
 * kept retrying, which the test reports as a hang.
 */
final class TxnAdmin {
  private TxnAdmin() {}

  private static String error(Throwable e) {
    Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
    return "\"error\":" + ClientTool.jstr(c.getClass().getSimpleName()) + ",\"message\":" + ClientTool.jstr(String.valueOf(c.getMessage()));
  }

  static int list(Map<String, String> o, PrintWriter out) throws Exception {
    try (Admin a = ClientTool.admin(o)) {
      try {
        List<String> txns = new ArrayList<>();
        for (TransactionListing t : a.listTransactions().all().get()) {
          txns.add("{\"id\":" + ClientTool.jstr(t.transactionalId()) + ",\"producer_id\":" + t.producerId()
              + ",\"state\":" + ClientTool.jstr(t.state().toString()) + "}");
        }
        out.println("{\"transactions\":[" + String.join(",", txns) + "]}");
      } catch (ExecutionException e) {
        out.println("{" + error(e) + "}");
      }
    }
    return 0;
  }

  static int describe(Map<String, String> o, PrintWriter out) throws Exception {
    List<String> ids = List.of(ClientTool.need(o, "txn-ids").split(","));
    try (Admin a = ClientTool.admin(o)) {
      var result = a.describeTransactions(ids);
      for (String id : ids) {
        try {
          TransactionDescription d = result.description(id).get();
          out.println("{\"id\":" + ClientTool.jstr(id) + ",\"state\":" + ClientTool.jstr(d.state().toString())
              + ",\"producer_id\":" + d.producerId() + "}");
        } catch (ExecutionException e) {
          out.println("{\"id\":" + ClientTool.jstr(id) + "," + error(e) + "}");
        }
      }
    }
    return 0;
  }
}
