// `kmirror dev up --yarn`: a MiniDFSCluster (one DataNode) and a MiniYARNCluster (one NodeManager) in this JVM,
// Hadoop's own test clusters, for trying and testing `spark.deploy: yarn` on one machine.
//
//   java --add-opens ... -cp <hadoop-minicluster jars>:<this jar> io.kmirror.dev.MiniHadoop HOME NM_MEMORY_MB NM_VCORES
//   java ... io.kmirror.dev.MiniHadoop HOME hdfs-only
//
// Everything sits in HOME: the clusters' folders, `conf/` (the HADOOP_CONF_DIR a client needs: core-site.xml,
// hdfs-site.xml, yarn-site.xml with only the addresses, never the merged test configuration, which names
// test-only classes) and `ready.json` (the addresses, written once both clusters serve). SIGTERM stops both.
// `hdfs-only`: the MiniDFSCluster alone (for a checkpoint root on HDFS without YARN): no yarn-site.xml, and
// `resource_manager` is "" in ready.json.
//
// The ResourceManager's and the NodeManager's web applications share Guice's static GuiceFilter pipeline; the
// NodeManager, started last, would answer the RM's /ws/v1/cluster REST API with 404. So once both run, the
// pipeline is pointed back at the ResourceManager's (the NodeManager's web pages are then not served).
package io.kmirror.dev;

import java.io.File;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;

public final class MiniHadoop {
  private MiniHadoop() {}

  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable t) {
      t.printStackTrace();
      System.exit(1); // the clusters' threads would keep a half-started JVM alive
    }
  }

  private static void run(String[] args) throws Exception {
    Path home = Path.of(args[0]).toAbsolutePath();
    boolean hdfsOnly = args.length == 2 && args[1].equals("hdfs-only");
    String host = "127.0.0.1";

    Configuration conf = hdfsOnly ? new Configuration() : new YarnConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, home.resolve("hdfs").toString());
    conf.set("hadoop.tmp.dir", home.resolve("tmp").toString());
    conf.set("dfs.replication", "1");
    conf.set("dfs.permissions.enabled", "false");
    conf.set("dfs.namenode.rpc-address", host + ":0");
    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf).numDataNodes(1).format(true).build();
    dfs.waitActive();
    String hdfsUri = "hdfs://" + host + ":" + dfs.getNameNodePort();
    String nnHttp = host + ":" + dfs.getNameNode().getHttpAddress().getPort();

    conf.set("fs.defaultFS", hdfsUri);
    Map<String, String> core = new LinkedHashMap<>();
    core.put("fs.defaultFS", hdfsUri);
    Map<String, String> hdfs = new LinkedHashMap<>();
    hdfs.put("dfs.replication", "1");
    hdfs.put("dfs.namenode.http-address", nnHttp);
    Path confDir = home.resolve("conf");
    Files.createDirectories(confDir);
    writeSite(confDir.resolve("core-site.xml"), core);
    writeSite(confDir.resolve("hdfs-site.xml"), hdfs);
    if (hdfsOnly) {
      Runtime.getRuntime().addShutdownHook(new Thread(dfs::shutdown, "kmirror-minihadoop-stop"));
      ready(home, "", hdfsUri, nnHttp, confDir);
      return;
    }

    int memoryMb = Integer.parseInt(args[1]);
    int vcores = Integer.parseInt(args[2]);
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "1.0");
    conf.setInt("yarn.scheduler.minimum-allocation-mb", 64);
    conf.setInt("yarn.scheduler.maximum-allocation-mb", memoryMb);
    conf.setInt("yarn.scheduler.maximum-allocation-vcores", vcores);
    conf.setInt("yarn.nodemanager.resource.memory-mb", memoryMb);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", vcores);
    conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    conf.setBoolean("yarn.nodemanager.disk-health-checker.enable", false);
    conf.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "100");
    conf.setInt("yarn.resourcemanager.am.max-attempts", 4);
    conf.setInt("yarn.nodemanager.delete.debug-delay-sec", 600);
    conf.set(YarnConfiguration.RM_HOSTNAME, host);
    conf.set("yarn.nodemanager.hostname", host);
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_CONTROL_RESOURCE_MONITORING, false);

    MiniYARNCluster yarn = new MiniYARNCluster("kmirror-dev", 1, 1, 1);
    yarn.init(conf);
    yarn.start();
    Configuration live = yarn.getConfig();
    pointGuiceAtResourceManager(yarn.getResourceManager());

    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        yarn.stop();
      } finally {
        dfs.shutdown();
      }
    }, "kmirror-minihadoop-stop"));

    Map<String, String> yarnSite = new LinkedHashMap<>();
    for (String key : new String[] {
        YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
        YarnConfiguration.RM_WEBAPP_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
        YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS}) {
      yarnSite.put(key, live.get(key));
    }
    yarnSite.put(YarnConfiguration.RM_HOSTNAME, host);
    writeSite(confDir.resolve("yarn-site.xml"), yarnSite);
    ready(home, "http://" + live.get(YarnConfiguration.RM_WEBAPP_ADDRESS), hdfsUri, nnHttp, confDir);
  }

  /** `ready.json` (atomically), then wait for SIGTERM (the shutdown hooks stop the clusters). */
  private static void ready(Path home, String rm, String hdfsUri, String nnHttp, Path confDir) throws Exception {
    String json = "{\"pid\": " + ProcessHandle.current().pid()
        + ", \"resource_manager\": \"" + rm + "\""
        + ", \"hdfs\": \"" + hdfsUri + "\""
        + ", \"webhdfs\": \"http://" + nnHttp + "\""
        + ", \"hadoop_conf_dir\": \"" + confDir + "\"}\n";
    Path tmp = home.resolve(".ready.json.tmp");
    Files.writeString(tmp, json, StandardCharsets.UTF_8);
    Files.move(tmp, home.resolve("ready.json"), StandardCopyOption.ATOMIC_MOVE);
    System.out.println("kmirror-minihadoop: ready " + json.trim());
    System.out.flush();
    new CountDownLatch(1).await();
  }

  /** Guice's static filter pipeline back to the ResourceManager's web application (see the file's head). */
  private static void pointGuiceAtResourceManager(ResourceManager rm) throws Exception {
    Method getWebapp = ResourceManager.class.getDeclaredMethod("getWebapp");
    getWebapp.setAccessible(true);
    Object webapp = getWebapp.invoke(rm);
    Field filterField = org.apache.hadoop.yarn.webapp.WebApp.class.getDeclaredField("guiceFilter");
    filterField.setAccessible(true);
    Object filter = filterField.get(webapp);
    Class<?> guiceFilter = Class.forName("com.google.inject.servlet.GuiceFilter");
    Field injected = guiceFilter.getDeclaredField("injectedPipeline");
    injected.setAccessible(true);
    Object pipeline = injected.get(filter);
    Field shared = guiceFilter.getDeclaredField("pipeline");
    shared.setAccessible(true);
    shared.set(null, pipeline);
  }

  private static void writeSite(Path file, Map<String, String> props) throws IOException {
    StringBuilder xml = new StringBuilder("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (Map.Entry<String, String> e : props.entrySet()) {
      xml.append("  <property><name>").append(e.getKey()).append("</name><value>")
          .append(e.getValue()).append("</value></property>\n");
    }
    xml.append("</configuration>\n");
    Files.writeString(file, xml.toString(), StandardCharsets.UTF_8);
  }
}
