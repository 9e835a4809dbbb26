// Stores aliases in a Hadoop credential provider, as `hadoop credential create ALIAS -provider URI` does, for the
// local Hadoop of `kmirror dev up --yarn` (an operator's cluster would have its own, made with that command):
//
//   java -cp <hadoop-minicluster jars>:<this jar> io.kmirror.dev.HadoopCredentials PROVIDER_URI < "alias=value" lines
//
// The values come on stdin, never on the command line. A `jceks://hdfs@host:port/path` store is written with the
// owner's permissions only (600): on HDFS, the file's permissions are what protect it (S3A's documented way).
package io.kmirror.dev;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.alias.CredentialProvider;
import org.apache.hadoop.security.alias.CredentialProviderFactory;

public final class HadoopCredentials {
  private HadoopCredentials() {}

  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set(CredentialProviderFactory.CREDENTIAL_PROVIDER_PATH, args[0]);
    List<CredentialProvider> providers = CredentialProviderFactory.getProviders(conf);
    if (providers.isEmpty()) {
      throw new IllegalArgumentException("no credential provider for " + args[0]);
    }
    CredentialProvider provider = providers.get(0);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    int stored = 0;
    while ((line = in.readLine()) != null) {
      int eq = line.indexOf('=');
      if (eq <= 0) {
        continue;
      }
      String alias = line.substring(0, eq);
      if (provider.getCredentialEntry(alias) != null) {
        provider.deleteCredentialEntry(alias);
      }
      provider.createCredentialEntry(alias, line.substring(eq + 1).toCharArray());
      stored++;
    }
    provider.flush();
    System.out.println("stored " + stored + " aliases in " + args[0]);
  }
}
