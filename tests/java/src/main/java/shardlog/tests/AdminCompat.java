package shardlog.tests;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Admin calls of the admin-API compatibility suite (tests/integration/test_admin_compat.py).
 *
 *   describe-topics --bootstrap B --topics T1,T2 [--partition-limit N] [--include-ops true]
 *       describeTopics by name (DescribeTopicPartitions, paginated by partitionSizeLimitPerResponse)
 *       -> {"topic":T,"internal":b,"partitions":[{"p":P,"leader":L,"replicas":[..],"isr":[..]}],
 *           "ops":[..]|null} per topic, or {"topic":T,"error":"..."}
 *   describe-cluster --bootstrap B [--include-ops true]
 *       -> {"cluster_id":..,"controller":N,"nodes":[N,..],"ops":[..]|null}
 *   describe-log-dirs --bootstrap B
 *       describeLogDirs for every node -> {"node":N,"dir":D,"total":T,"usable":U,"error":..|null,
 *           "replicas":{"t-p":{"size":S,"lag":L,"future":b}}} per log dir
 *   describe-configs --bootstrap B --type broker|topic|group --name N [--synonyms true] [--docs true]
 *       describeConfigs -> {"name":K,"value":V|null,"source":S,"type":T,"doc":D|null,"read_only":b,
 *           "sensitive":b,"synonyms":[{"name":K,"value":V|null,"source":S}]} per config, or {"error":"..."}
 */
final class AdminCompat {
  private AdminCompat() {}

  private static boolean includeOps(Map<String, String> o) {
    return Boolean.parseBoolean(o.getOrDefault("include-ops", "false"));
  }

  private static String ops(Set<AclOperation> ops) {
    if (ops == null) return "null";
    TreeSet<String> names = new TreeSet<>();
    for (AclOperation op : ops) names.add(ClientTool.jstr(op.name()));
    return "[" + String.join(",", names) + "]";
  }

  private static String ints(List<Node> nodes) {
    List<String> ids = new ArrayList<>();
    for (Node n : nodes) ids.add(Integer.toString(n.id()));
    return "[" + String.join(",", ids) + "]";
  }

  static int describeTopics(Map<String, String> o, PrintWriter out) throws Exception {
    List<String> topics = List.of(ClientTool.need(o, "topics").split(","));
    DescribeTopicsOptions opts = new DescribeTopicsOptions().includeAuthorizedOperations(includeOps(o));
    if (o.containsKey("partition-limit")) opts.partitionSizeLimitPerResponse(Integer.parseInt(o.get("partition-limit")));
    int rc = 0;
    try (Admin a = ClientTool.admin(o)) {
      var futures = a.describeTopics(TopicCollection.ofTopicNames(topics), opts).topicNameValues();
      for (String t : topics) {
        try {
          TopicDescription d = futures.get(t).get();
          List<String> parts = new ArrayList<>();
          for (TopicPartitionInfo p : d.partitions()) {
            parts.add("{\"p\":" + p.partition() + ",\"leader\":" + (p.leader() == null ? -1 : p.leader().id())
                + ",\"replicas\":" + ints(p.replicas()) + ",\"isr\":" + ints(p.isr()) + "}");
          }
          out.println("{\"topic\":" + ClientTool.jstr(t) + ",\"internal\":" + d.isInternal() + ",\"partitions\":["
              + String.join(",", parts) + "],\"ops\":" + ops(d.authorizedOperations()) + "}");
        } catch (java.util.concurrent.ExecutionException e) {
          out.println("{\"topic\":" + ClientTool.jstr(t) + ",\"error\":" + ClientTool.jstr(e.getCause().toString()) + "}");
          rc = 1;
        }
      }
    }
    return rc;
  }

  static int describeCluster(Map<String, String> o, PrintWriter out) throws Exception {
    try (Admin a = ClientTool.admin(o)) {
      // --include-fenced true: DescribeCluster v2 with IncludeFencedBrokers (KIP-1073).
      boolean withFenced = Boolean.parseBoolean(o.getOrDefault("include-fenced", "false"));
      DescribeClusterResult r = a.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(includeOps(o))
          .includeFencedBrokers(withFenced));
      List<Node> nodes = new ArrayList<>(r.nodes().get());
      List<Node> fenced = new ArrayList<>();
      for (Node n : nodes) if (n.isFenced()) fenced.add(n);
      out.println("{\"cluster_id\":" + ClientTool.jstr(r.clusterId().get()) + ",\"controller\":" + r.controller().get().id()
          + ",\"nodes\":" + ints(nodes) + ",\"fenced\":" + ints(fenced) + ",\"ops\":" + ops(r.authorizedOperations().get()) + "}");
    }
    return 0;
  }

  static int describeLogDirs(Map<String, String> o, PrintWriter out) throws Exception {
    try (Admin a = ClientTool.admin(o)) {
      List<Integer> ids = new ArrayList<>();
      for (Node n : a.describeCluster().nodes().get()) ids.add(n.id());
      Map<Integer, Map<String, LogDirDescription>> all = a.describeLogDirs(ids).allDescriptions().get();
      for (var node : all.entrySet()) {
        for (var dir : node.getValue().entrySet()) {
          LogDirDescription d = dir.getValue();
          List<String> replicas = new ArrayList<>();
          for (Map.Entry<TopicPartition, ReplicaInfo> e : d.replicaInfos().entrySet()) {
            ReplicaInfo ri = e.getValue();
            replicas.add(ClientTool.jstr(e.getKey().toString()) + ":{\"size\":" + ri.size() + ",\"lag\":" + ri.offsetLag()
                + ",\"future\":" + ri.isFuture() + "}");
          }
          out.println("{\"node\":" + node.getKey() + ",\"dir\":" + ClientTool.jstr(dir.getKey())
              + ",\"total\":" + d.totalBytes().orElse(-1) + ",\"usable\":" + d.usableBytes().orElse(-1)
              + ",\"error\":" + (d.error() == null ? "null" : ClientTool.jstr(d.error().toString()))
              + ",\"replicas\":{" + String.join(",", replicas) + "}}");
        }
      }
    }
    return 0;
  }

  static int describeConfigs(Map<String, String> o, PrintWriter out) throws Exception {
    ConfigResource.Type type = ConfigResource.Type.valueOf(ClientTool.need(o, "type").toUpperCase());
    ConfigResource res = new ConfigResource(type, o.getOrDefault("name", ""));
    DescribeConfigsOptions opts = new DescribeConfigsOptions()
        .includeSynonyms(Boolean.parseBoolean(o.getOrDefault("synonyms", "false")))
        .includeDocumentation(Boolean.parseBoolean(o.getOrDefault("docs", "false")));
    try (Admin a = ClientTool.admin(o)) {
      Config c;
      try {
        c = a.describeConfigs(List.of(res), opts).all().get().get(res);
      } catch (java.util.concurrent.ExecutionException e) {
        out.println("{\"error\":" + ClientTool.jstr(e.getCause().toString()) + "}");
        return 1;
      }
      for (ConfigEntry e : c.entries()) {
        List<String> syn = new ArrayList<>();
        for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
          syn.add("{\"name\":" + ClientTool.jstr(s.name()) + ",\"value\":" + (s.value() == null ? "null" : ClientTool.jstr(s.value()))
              + ",\"source\":" + ClientTool.jstr(s.source().name()) + "}");
        }
        out.println("{\"name\":" + ClientTool.jstr(e.name()) + ",\"value\":" + (e.value() == null ? "null" : ClientTool.jstr(e.value()))
            + ",\"source\":" + ClientTool.jstr(e.source().name()) + ",\"type\":" + ClientTool.jstr(e.type().name())
            + ",\"doc\":" + (e.documentation() == null ? "null" : ClientTool.jstr(e.documentation()))
            + ",\"read_only\":" + e.isReadOnly() + ",\"sensitive\":" + e.isSensitive()
            + ",\"synonyms\":[" + String.join(",", syn) + "]}");
      }
    }
    return 0;
  }
}
