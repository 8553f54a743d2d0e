package io.pushrelay.kit;

/**
 * Standard base64 with padding (RFC 4648 section 4), strict. The library's own: java.util.Base64
 * needs Android API 26, and android.util.Base64 does not exist on the JVM the tests run on.
 */
final class Base64Codec {
    private static final char[] ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".toCharArray();
    private static final int[] VALUES = new int[128];

    static {
        java.util.Arrays.fill(VALUES, -1);
        for (int index = 0; index < ALPHABET.length; index++) VALUES[ALPHABET[index]] = index;
    }

    private Base64Codec() {}

    static String encode(byte[] data) {
        StringBuilder text = new StringBuilder((data.length + 2) / 3 * 4);
        for (int index = 0; index < data.length; index += 3) {
            int remaining = data.length - index;
            int bits = (data[index] & 0xff) << 16;
            if (remaining > 1) bits |= (data[index + 1] & 0xff) << 8;
            if (remaining > 2) bits |= data[index + 2] & 0xff;
            text.append(ALPHABET[(bits >> 18) & 63]).append(ALPHABET[(bits >> 12) & 63]);
            text.append(remaining > 1 ? ALPHABET[(bits >> 6) & 63] : '=');
            text.append(remaining > 2 ? ALPHABET[bits & 63] : '=');
        }
        return text.toString();
    }

    /** The bytes, or {@code null} when {@code text} is not standard padded base64. */
    static byte[] decode(String text) {
        int length = text.length();
        if (length % 4 != 0) return null;
        int padding = 0;
        if (length > 0 && text.charAt(length - 1) == '=') padding++;
        if (length > 1 && text.charAt(length - 2) == '=') padding++;
        byte[] out = new byte[length / 4 * 3 - padding];
        int written = 0;
        for (int index = 0; index < length; index += 4) {
            int bits = 0;
            for (int position = index; position < index + 4; position++) {
                char character = text.charAt(position);
                int value;
                if (position >= length - padding) {
                    value = 0;
                } else if (character < 128 && VALUES[character] >= 0) {
                    value = VALUES[character];
                } else {
                    return null;
                }
                bits = (bits << 6) | value;
            }
            for (int shift = 16; shift >= 0 && written < out.length; shift -= 8) out[written++] = (byte) (bits >> shift);
        }
        // Non-canonical text (bits set where padding goes) is refused, as strict decoders do.
        return encode(out).equals(text) ? out : null;
    }
}
