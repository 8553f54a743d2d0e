package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.Charset;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.List;

/**
 * Push keys in a file readable by its owner only (mode 0600), replaced atomically on each save
 * (a new file beside it, renamed over it). On Android, put it in the app's private storage
 * ({@code new File(context.getNoBackupFilesDir(), "push-relay-keys")}) and seal it with a key
 * of the Android Keystore ({@link Sealer}; docs/client.md has one), so a copy of the file alone
 * opens nothing.
 *
 * <p>Each call reads the file, so a key the app's client saves is what the messaging service's
 * decryptor reads next. Thread-safe within one process.
 */
public final class FilePushKeyStore implements PushKeyStore {
    private static final Charset UTF8 = Charset.forName("UTF-8");
    /** Three keys take under 300 bytes; a larger file is not a key file. */
    private static final int MAX_FILE = 1024 * 1024;

    /**
     * Seals the file's contents before they are written and opens them after they are read: with
     * a key of the Android Keystore, say. Called on the library's background threads.
     */
    public interface Sealer {
        /** The sealed form of {@code plaintext}. */
        @NonNull
        byte[] seal(@NonNull byte[] plaintext) throws GeneralSecurityException, IOException;

        /** {@code sealed} opened, as it was before {@link #seal}. */
        @NonNull
        byte[] open(@NonNull byte[] sealed) throws GeneralSecurityException, IOException;
    }

    private final File file;
    private final Sealer sealer;

    /** Keys in {@code file} as JSON; its folder is created at the first save. */
    public FilePushKeyStore(@NonNull File file) {
        this(file, null);
    }

    /** Keys in {@code file}, sealed by {@code sealer} ({@code null}: plain JSON). */
    public FilePushKeyStore(@NonNull File file, @Nullable Sealer sealer) {
        this.file = file;
        this.sealer = sealer;
    }

    /** The file the keys are in. */
    @NonNull
    public File getFile() {
        return file;
    }

    @Override
    @Nullable
    public synchronized PushKey currentKey() throws IOException {
        List<PushKey> keys = load();
        return keys.isEmpty() ? null : keys.get(0);
    }

    @Override
    @Nullable
    public synchronized PushKey key(@NonNull String id) throws IOException {
        return PushKeyRing.find(load(), id);
    }

    @Override
    public synchronized void save(@NonNull PushKey key) throws IOException {
        byte[] data = PushKeyRing.encode(PushKeyRing.saving(key, load())).getBytes(UTF8);
        if (sealer != null) {
            try {
                data = sealer.seal(data);
            } catch (GeneralSecurityException error) {
                throw new IOException("sealing the push keys failed: " + error, error);
            }
        }
        replaceFile(data);
    }

    /** The keys, newest first; none when the file does not exist. */
    private List<PushKey> load() throws IOException {
        if (!file.exists()) return new ArrayList<PushKey>();
        byte[] data = Streams.readAll(new FileInputStream(file), MAX_FILE);
        if (sealer != null) {
            try {
                data = sealer.open(data);
            } catch (GeneralSecurityException error) {
                throw new IOException("opening the push keys failed: " + error, error);
            }
        }
        return PushKeyRing.decode(new String(data, UTF8));
    }

    /**
     * Writes a new file beside the store's, readable and writable by the owner only before any
     * byte is in it, synced, then renamed over the store's file.
     */
    private void replaceFile(byte[] data) throws IOException {
        File folder = file.getAbsoluteFile().getParentFile();
        if (folder != null && !folder.isDirectory() && !folder.mkdirs() && !folder.isDirectory()) {
            throw new IOException("cannot create " + folder);
        }
        File temporary = File.createTempFile(file.getName() + ".", ".tmp", folder);
        boolean done = false;
        try {
            // Owner only: take every permission away from everyone, then give the owner read and write.
            boolean restricted = temporary.setReadable(false, false) && temporary.setWritable(false, false)
                && temporary.setExecutable(false, false) && temporary.setReadable(true, true) && temporary.setWritable(true, true);
            if (!restricted) throw new IOException("cannot make " + temporary + " private");
            FileOutputStream output = new FileOutputStream(temporary);
            try {
                output.write(data);
                output.getFD().sync();
            } finally {
                output.close();
            }
            if (!temporary.renameTo(file)) throw new IOException("cannot rename " + temporary + " to " + file);
            done = true;
        } finally {
            if (!done && !temporary.delete() && temporary.exists()) temporary.deleteOnExit();
        }
    }
}
