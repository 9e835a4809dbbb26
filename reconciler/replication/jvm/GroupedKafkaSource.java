package io.kmirror.replication;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.kafka010.KafkaBatchInputPartition;
import org.apache.spark.sql.kafka010.KafkaSourcePartitionOffset;
import org.apache.spark.sql.kafka010.KafkaSourceProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's Kafka source, with several source partitions per real-time task.
 *
 * Spark's own source runs one real-time task per source partition, each with its own consumer: 265 partitions
 * are 265 long-running threads, 265 consumers and fetch sessions, and 265 tasks to end and start again at every
 * checkpoint boundary. This source is Spark's (`spark.readStream.format(GroupedKafkaSource.NAME)`, the same
 * options, offsets and checkpoint), except that in real-time mode its tasks each read a group of partitions
 * with one consumer (`GroupedKafkaReader`). The option `kmirror.tasks` sets how many tasks the partitions are
 * dealt to (at most one per partition); partitions added while the query runs join the existing tasks.
 * With the option `kmirror.sourcePositions` true, every real-time task is a group (a group of one too), and its
 * reader hands each row's source position to the replication interceptor (see SourcePosition).
 * Micro-batches are planned and read exactly as Spark's source does.
 */
public final class GroupedKafkaSource implements TableProvider {
    public static final String NAME = "io.kmirror.replication.GroupedKafkaSource";
    /** The option with the number of real-time tasks (absent, or not above zero: one task per partition). */
    public static final String TASKS = "kmirror.tasks";
    /** The option that has real-time readers hand on each row's source position ("true"; absent: they do not). */
    public static final String SOURCE_POSITIONS = "kmirror.sourcePositions";

    /** How real-time tasks read: how many tasks the partitions are dealt to, and whether they hand on positions. */
    static final class Grouping implements Serializable {
        private static final long serialVersionUID = 1L;
        final int tasks;
        final boolean positions;

        Grouping(int tasks, boolean positions) {
            this.tasks = tasks;
            this.positions = positions;
        }
    }

    private final KafkaSourceProvider kafka = new KafkaSourceProvider();

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return kafka.inferSchema(options);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        int tasks = 0;
        String value = properties.get(TASKS);
        if (value != null) {
            try {
                tasks = Integer.parseInt(value.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(TASKS + " must be a whole number, not '" + value + "'", e);
            }
        }
        boolean positions = Boolean.parseBoolean(properties.getOrDefault(SOURCE_POSITIONS, "false").trim());
        return new GroupedTable((SupportsRead) kafka.getTable(schema, partitioning, properties),
                new Grouping(tasks, positions));
    }

    /** Spark's Kafka table; its scans' streams group partitions in real-time mode. */
    private static final class GroupedTable implements SupportsRead {
        private final SupportsRead kafka;
        private final Grouping grouping;

        GroupedTable(SupportsRead kafka, Grouping grouping) {
            this.kafka = kafka;
            this.grouping = grouping;
        }

        @Override
        public String name() {
            return kafka.name();
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return kafka.schema();
        }

        @Override
        public Set<TableCapability> capabilities() {
            return kafka.capabilities();
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            ScanBuilder builder = kafka.newScanBuilder(options);
            return () -> new GroupedScan(builder.build(), grouping);
        }
    }

    private static final class GroupedScan implements Scan {
        private final Scan kafka;
        private final Grouping grouping;

        GroupedScan(Scan kafka, Grouping grouping) {
            this.kafka = kafka;
            this.grouping = grouping;
        }

        @Override
        public StructType readSchema() {
            return kafka.readSchema();
        }

        @Override
        public String description() {
            return kafka.description();
        }

        @Override
        public Batch toBatch() {
            return kafka.toBatch();
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return new GroupedStream(kafka.toMicroBatchStream(checkpointLocation), grouping);
        }

        @Override
        public ContinuousStream toContinuousStream(String checkpointLocation) {
            return kafka.toContinuousStream(checkpointLocation);
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return kafka.supportedCustomMetrics();
        }

        @Override
        public ColumnarSupportMode columnarSupportMode() {
            return kafka.columnarSupportMode();
        }
    }

    /** Spark's Kafka stream; in real-time mode its partitions are dealt to tasks (`grouping`). */
    static final class GroupedStream
            implements MicroBatchStream, SupportsRealTimeMode, SupportsTriggerAvailableNow, ReportsSourceMetrics {
        private final MicroBatchStream kafka;
        private final Grouping grouping;

        GroupedStream(MicroBatchStream kafka, Grouping grouping) {
            this.kafka = kafka;
            this.grouping = grouping;
        }

        @Override
        public InputPartition[] planInputPartitions(Offset start) {
            return group(((SupportsRealTimeMode) kafka).planInputPartitions(start), grouping);
        }

        @Override
        public Offset mergeOffsets(PartitionOffset[] offsets) {
            List<PartitionOffset> each = new ArrayList<>();
            for (PartitionOffset offset : offsets) {
                if (offset instanceof GroupOffset) {
                    ((GroupOffset) offset).next.forEach((tp, next) -> each.add(new KafkaSourcePartitionOffset(tp, next)));
                } else {
                    each.add(offset);
                }
            }
            return ((SupportsRealTimeMode) kafka).mergeOffsets(each.toArray(new PartitionOffset[0]));
        }

        @Override
        public void prepareForRealTimeMode() {
            ((SupportsRealTimeMode) kafka).prepareForRealTimeMode();
        }

        @Override
        public InputPartition[] planInputPartitions(Offset start, Offset end) {
            return kafka.planInputPartitions(start, end);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new GroupedReaderFactory(kafka.createReaderFactory());
        }

        @Override
        public Offset latestOffset() {
            return kafka.latestOffset();
        }

        @Override
        public Offset latestOffset(Offset start, ReadLimit limit) {
            return ((SupportsAdmissionControl) kafka).latestOffset(start, limit);
        }

        @Override
        public ReadLimit getDefaultReadLimit() {
            return ((SupportsAdmissionControl) kafka).getDefaultReadLimit();
        }

        @Override
        public Offset reportLatestOffset() {
            return ((SupportsAdmissionControl) kafka).reportLatestOffset();
        }

        @Override
        public void prepareForTriggerAvailableNow() {
            ((SupportsTriggerAvailableNow) kafka).prepareForTriggerAvailableNow();
        }

        @Override
        public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
            return ((ReportsSourceMetrics) kafka).metrics(latestConsumedOffset);
        }

        @Override
        public Offset initialOffset() {
            return kafka.initialOffset();
        }

        @Override
        public Offset deserializeOffset(String json) {
            return kafka.deserializeOffset(json);
        }

        @Override
        public void commit(Offset end) {
            kafka.commit(end);
        }

        @Override
        public void stop() {
            kafka.stop();
        }

        @Override
        public String toString() {
            return kafka.toString();
        }
    }

    /**
     * Spark's one-partition input partitions dealt round-robin, in topic and partition order, to at most
     * `grouping.tasks` groups (so a topic's partitions spread over the tasks; one per task when that is not above
     * zero). A group of one stays Spark's own partition, unless the readers hand on source positions: Spark's
     * own reader does not.
     */
    static InputPartition[] group(InputPartition[] partitions, Grouping grouping) {
        int tasks = grouping.tasks <= 0 ? partitions.length : Math.min(grouping.tasks, partitions.length);
        if (!grouping.positions && tasks == partitions.length) {
            return partitions;
        }
        List<KafkaBatchInputPartition> sorted = new ArrayList<>();
        for (InputPartition p : partitions) {
            sorted.add((KafkaBatchInputPartition) p);
        }
        sorted.sort(Comparator.comparing((KafkaBatchInputPartition p) -> p.offsetRange().topicPartition().topic())
                .thenComparingInt(p -> p.offsetRange().topicPartition().partition()));
        List<List<KafkaBatchInputPartition>> groups = new ArrayList<>();
        for (int i = 0; i < tasks; i++) {
            groups.add(new ArrayList<>());
        }
        for (int i = 0; i < sorted.size(); i++) {
            groups.get(i % tasks).add(sorted.get(i));
        }
        InputPartition[] planned = new InputPartition[tasks];
        for (int i = 0; i < tasks; i++) {
            planned[i] = new GroupPartition(groups.get(i).toArray(new KafkaBatchInputPartition[0]),
                    grouping.positions);
        }
        return planned;
    }

    /** Several of Spark's Kafka input partitions, read by one task with one consumer. */
    static final class GroupPartition implements InputPartition {
        private static final long serialVersionUID = 1L;
        final KafkaBatchInputPartition[] members;
        final boolean positions;

        GroupPartition(KafkaBatchInputPartition[] members, boolean positions) {
            this.members = members;
            this.positions = positions;
        }
    }

    /** Where a group's task ended: the next offset of each of its partitions. */
    static final class GroupOffset implements PartitionOffset {
        private static final long serialVersionUID = 1L;
        final LinkedHashMap<TopicPartition, Long> next;

        GroupOffset(Map<TopicPartition, Long> next) {
            this.next = new LinkedHashMap<>(next);
        }
    }

    /** A group's reader for a group, Spark's own reader for anything else. */
    static final class GroupedReaderFactory implements PartitionReaderFactory, Serializable {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory kafka;

        GroupedReaderFactory(PartitionReaderFactory kafka) {
            this.kafka = kafka;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            if (partition instanceof GroupPartition) {
                GroupPartition group = (GroupPartition) partition;
                return new GroupedKafkaReader(group.members, group.positions);
            }
            return kafka.createReader(partition);
        }
    }
}
