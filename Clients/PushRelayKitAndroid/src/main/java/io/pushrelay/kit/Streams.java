package io.pushrelay.kit;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;

/** Reading a stream whole, for the relay's answers and the key file alike. */
final class Streams {
    private Streams() {}

    /** Everything {@code input} holds, up to {@code limit} bytes (more is an error); closes it. */
    static byte[] readAll(InputStream input, int limit) throws IOException {
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buffer = new byte[8192];
            int count;
            while ((count = input.read(buffer)) > 0) {
                out.write(buffer, 0, count);
                if (out.size() > limit) throw new IOException("more than " + limit + " bytes");
            }
            return out.toByteArray();
        } finally {
            input.close();
        }
    }
}
