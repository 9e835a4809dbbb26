package io.kmirror.replication;

import org.apache.spark.sql.catalyst.parser.CatalystSqlParser$;
import org.codehaus.janino.ClassBodyEvaluator;

/**
 * Spark's one-time work that a job's start otherwise does on its critical path, done first on a daemon thread
 * while the driver's Python side still imports and asks the clusters for their partitions (the JVM idles then).
 *
 * On a cold JVM (2 cores, timed one by one) each step took about 0.25 s where the job meets it:
 * - the error catalogue, parsed from JSON on first use: the first batch of a fresh checkpoint builds (and
 *   catches) a SparkFileNotFoundException for the initial offsets not written yet, on the query's thread;
 * - the SQL grammar (ANTLR): the job's projection is parsed while the query is set up;
 * - the Janino compiler: the first batch's generated code is compiled on the query's thread.
 *
 * A class is initialised once per JVM: a thread that needs one still being initialised here waits for it
 * instead of doing the work again. Nothing outside the JVM is touched; any failure is ignored (the job then
 * does the work itself, as before).
 */
public final class SparkWarmup {
    private SparkWarmup() {}

    public static void start() {
        Thread thread = new Thread(SparkWarmup::warm, "kmirror-spark-warmup");
        thread.setDaemon(true);
        thread.start();
    }

    private static void warm() {
        try {
            Class.forName("org.apache.spark.SparkThrowableHelper$");
        } catch (Exception | LinkageError ignored) {
            // the error catalogue is read when first needed
        }
        try {
            CatalystSqlParser$.MODULE$.parseExpression("CAST(key AS BINARY) AS key");
        } catch (Exception | LinkageError ignored) {
            // the grammar is loaded when first needed
        }
        try {
            ClassBodyEvaluator compiler = new ClassBodyEvaluator();
            compiler.setClassName("io.kmirror.replication.SparkWarmupGenerated");
            compiler.cook("public int next(int x) { return x + 1; }");
        } catch (Exception | LinkageError ignored) {
            // the compiler is loaded when first needed
        }
    }
}
