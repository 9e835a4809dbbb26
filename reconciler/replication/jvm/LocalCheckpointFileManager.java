package io.kmirror.replication;

import java.io.FileNotFoundException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * The job's Spark checkpoint files (offset log, commit log, the source's initial offsets, the query's metadata)
 * on a local file system, written with java.nio instead of Hadoop's local file system.
 *
 * Without Hadoop's native library (pip's pyspark has none) Hadoop's local file system runs a shell command for
 * each permission it sets and each link it reads: writing one checkpoint file (a temporary file, its checksum
 * file, a rename of both) started 2 `chmod` and 6 `readlink` processes, 16 per batch, 100-200 ms of every
 * real-time checkpoint boundary on a busy 2-core machine (JFR's jdk.ProcessStart). Here a file is written to a
 * temporary file beside it, forced to disk, and renamed into place: readers see the whole file or none, as
 * with Spark's own managers. A file that must not be overwritten is linked into place, which fails when it
 * exists (Hadoop's FileAlreadyExistsException, which Spark reads as a concurrent writer). No checksum files
 * are written; a stale one beside a file written here is removed, so Spark's default manager can read the
 * checkpoint again.
 *
 * Paths on any other file system (HDFS, object stores) go to the manager Spark would have chosen.
 * Set by the job as spark.sql.streaming.checkpointFileManagerClass (unless the flow's Spark settings set one).
 */
public final class LocalCheckpointFileManager implements CheckpointFileManager {
    private final Path root;
    private final RawLocalFileSystem raw;
    private final CheckpointFileManager other;

    public LocalCheckpointFileManager(Path path, Configuration conf) throws IOException {
        FileSystem fs = path.getFileSystem(conf);
        if (fs instanceof LocalFileSystem || fs instanceof RawLocalFileSystem) {
            root = fs.makeQualified(path);
            raw = new RawLocalFileSystem();
            raw.initialize(root.toUri(), conf);
            other = null;
        } else {
            root = path;
            raw = null;
            other = sparkDefault(path, conf);
        }
    }

    private static CheckpointFileManager sparkDefault(Path path, Configuration conf) {
        try {
            return new FileContextBasedCheckpointFileManager(path, conf);
        } catch (Exception e) { // Scala declares none; FileContext throws UnsupportedFileSystemException
            if (e instanceof UnsupportedFileSystemException) {
                return new FileSystemBasedCheckpointFileManager(path, conf); // as Spark's CheckpointFileManager.create
            }
            throw sneaky(e);
        }
    }

    /**
     * Throws `e` unchanged: Spark's interface (Scala) declares no exceptions, while its callers catch Hadoop's
     * (FileNotFoundException, FileAlreadyExistsException) as Spark's own managers throw them.
     */
    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
        throw (E) e;
    }

    private static java.nio.file.Path local(Path path) {
        return java.nio.file.Paths.get(path.toUri().getPath());
    }

    /** Hadoop's checksum file of `target`, which a checksummed reader would check the file against. */
    private static java.nio.file.Path checksumOf(java.nio.file.Path target) {
        return target.resolveSibling("." + target.getFileName() + ".crc");
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (other != null) {
            return other.createAtomic(path, overwriteIfPossible);
        }
        java.nio.file.Path target = local(path);
        java.nio.file.Path temp = target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try {
            Files.createDirectories(target.getParent());
            return new AtomicFile(new FileOutputStream(temp.toFile()), temp, target, overwriteIfPossible);
        } catch (IOException e) {
            throw sneaky(e);
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        if (other != null) {
            return other.open(path);
        }
        try {
            return raw.open(path);
        } catch (IOException e) {
            throw sneaky(e);
        }
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        if (other != null) {
            return other.list(path, filter);
        }
        java.nio.file.Path dir = local(path);
        List<FileStatus> found = new ArrayList<>();
        try (DirectoryStream<java.nio.file.Path> entries = Files.newDirectoryStream(dir)) {
            for (java.nio.file.Path entry : entries) {
                String name = entry.getFileName().toString();
                if (name.startsWith(".") && name.endsWith(".crc")) {
                    continue; // as Hadoop's checksummed file systems list
                }
                BasicFileAttributes attrs;
                try {
                    attrs = Files.readAttributes(entry, BasicFileAttributes.class);
                } catch (NoSuchFileException gone) {
                    continue;
                }
                Path child = new Path(entry.toUri());
                if (filter.accept(child)) {
                    found.add(new FileStatus(attrs.size(), attrs.isDirectory(), 1, 32 * 1024 * 1024,
                            attrs.lastModifiedTime().toMillis(), child));
                }
            }
        } catch (NoSuchFileException e) {
            throw sneaky(new FileNotFoundException("File " + path + " does not exist")); // as Hadoop's
        } catch (IOException e) {
            throw sneaky(e);
        }
        return found.toArray(new FileStatus[0]);
    }

    @Override
    public void mkdirs(Path path) {
        if (other != null) {
            other.mkdirs(path);
            return;
        }
        try {
            Files.createDirectories(local(path));
        } catch (IOException e) {
            throw sneaky(e);
        }
    }

    @Override
    public boolean exists(Path path) {
        return other != null ? other.exists(path) : Files.exists(local(path));
    }

    @Override
    public void delete(Path path) {
        if (other != null) {
            other.delete(path);
            return;
        }
        java.nio.file.Path target = local(path);
        try {
            if (Files.isDirectory(target, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                try (Stream<java.nio.file.Path> walk = Files.walk(target)) {
                    for (java.nio.file.Path p : (Iterable<java.nio.file.Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
                        Files.deleteIfExists(p);
                    }
                }
            } else {
                Files.deleteIfExists(target);
                Files.deleteIfExists(checksumOf(target));
            }
        } catch (IOException e) {
            throw sneaky(e);
        }
    }

    @Override
    public boolean isLocal() {
        return other == null || other.isLocal();
    }

    @Override
    public Path createCheckpointDirectory() {
        if (other != null) {
            return other.createCheckpointDirectory();
        }
        mkdirs(root);
        return root;
    }

    /** A temporary file that becomes `target` when closed (forced to disk first), or goes away when cancelled. */
    private static final class AtomicFile extends CancellableFSDataOutputStream {
        private final FileOutputStream out;
        private final java.nio.file.Path temp;
        private final java.nio.file.Path target;
        private final boolean overwrite;
        private boolean done;

        AtomicFile(FileOutputStream out, java.nio.file.Path temp, java.nio.file.Path target, boolean overwrite) {
            super(out);
            this.out = out;
            this.temp = temp;
            this.target = target;
            this.overwrite = overwrite;
        }

        @Override
        public synchronized void close() throws IOException {
            if (done) {
                return;
            }
            done = true;
            try {
                flush();
                out.getFD().sync();
                super.close();
                if (overwrite) {
                    Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
                } else {
                    boolean linked;
                    try {
                        Files.createLink(target, temp); // atomic, and refused when target exists
                        linked = true;
                    } catch (FileAlreadyExistsException e) {
                        throw new org.apache.hadoop.fs.FileAlreadyExistsException(target + " already exists");
                    } catch (UnsupportedOperationException | IOException noLinks) {
                        linked = false; // a file system without hard links: check, then rename
                    }
                    if (linked) {
                        Files.delete(temp);
                    } else if (Files.exists(target)) {
                        throw new org.apache.hadoop.fs.FileAlreadyExistsException(target + " already exists");
                    } else {
                        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
                    }
                }
                Files.deleteIfExists(checksumOf(target));
            } catch (IOException | RuntimeException e) {
                Files.deleteIfExists(temp);
                throw e;
            }
        }

        @Override
        public synchronized void cancel() {
            if (done) {
                return;
            }
            done = true;
            try {
                super.close();
            } catch (IOException ignored) {
                // the temporary file goes anyway
            }
            try {
                Files.deleteIfExists(temp);
            } catch (IOException ignored) {
                // a leftover temporary file is ignored by Spark's readers (its name is not a batch number)
            }
        }
    }
}
