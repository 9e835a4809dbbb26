// Deletes a removed flow's checkpoint on a Hadoop filesystem that kmirror cannot reach over plain HTTP (s3a:), with
// Hadoop's own FileSystem API: the same client, jars and settings the job reached it with.
//
//   java -cp <this jar>:<pyspark jars>/*:<S3A jars>/*[:HADOOP_CONF_DIR] io.kmirror.tools.HadoopDelete URI
//
// stdin: the job's Hadoop settings, one `key=value` a line (credentials among them stay off the command line).
// Prints `deleted URI` or `absent URI`; a failure is the exception's message on stderr and exit code 1.
package io.kmirror.tools;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

public final class HadoopDelete {
  private HadoopDelete() {}

  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      int eq = line.indexOf('=');
      if (eq > 0) {
        conf.set(line.substring(0, eq), line.substring(eq + 1));
      }
    }
    Path path = new Path(args[0]);
    try {
      FileSystem fs = path.getFileSystem(conf);
      if (!fs.exists(path)) {
        System.out.println("absent " + args[0]);
        return;
      }
      fs.delete(path, true);
      System.out.println("deleted " + args[0]);
    } catch (Exception e) {
      System.err.println(e.getClass().getSimpleName() + ": " + e.getMessage());
      System.exit(1);
    }
  }
}
